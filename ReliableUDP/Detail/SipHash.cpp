// SipHash-2-4 is libsodium's crypto_shorthash; random keys come from libsodium's CSPRNG.
#include "ReliableUDP/Detail/SipHash.h"

#include <sodium.h>

#include <stdexcept>

namespace timerwheel::rudp::detail {
namespace {

static_assert(crypto_shorthash_BYTES == 8 && crypto_shorthash_KEYBYTES == 16,
              "crypto_shorthash is SipHash-2-4 with a 128-bit key and a 64-bit output");

void StoreLittle64(std::uint8_t* p, std::uint64_t value) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint64_t LoadLittle64(const std::uint8_t* p) noexcept {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

// libsodium asks for sodium_init() before its random numbers are used. Thread-safe and idempotent
// (0 the first time, 1 after); -1 only when the platform has no usable random number source,
// which nothing here could work around.
void InitialiseSodium() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised");
}

}  // namespace

std::uint64_t SipHash24(const SipHashKey& key, const std::uint8_t* data,
                        std::size_t size) noexcept {
  std::uint8_t keyBytes[crypto_shorthash_KEYBYTES];
  StoreLittle64(keyBytes, key.k0);
  StoreLittle64(keyBytes + 8, key.k1);
  std::uint8_t out[crypto_shorthash_BYTES];
  crypto_shorthash(out, data, size, keyBytes);  // data may be null when size is 0
  return LoadLittle64(out);
}

SipHashKey RandomSipHashKey() {
  InitialiseSodium();
  std::uint8_t bytes[16];
  randombytes_buf(bytes, sizeof bytes);
  return SipHashKey{LoadLittle64(bytes), LoadLittle64(bytes + 8)};
}

ConnectionIdGenerator::ConnectionIdGenerator(SipHashKey key) noexcept : m_key(key) {}

std::uint64_t ConnectionIdGenerator::Next() noexcept {
  for (;;) {
    std::uint8_t counter[8];
    StoreLittle64(counter, m_counter);
    ++m_counter;
    const std::uint64_t id = SipHash24(m_key, counter, sizeof(counter));
    if (id != 0) return id;
  }
}

std::uint64_t ConnectionIdGenerator::Companion() const noexcept {
  std::uint8_t input[9];
  StoreLittle64(input, m_counter);
  input[8] = 1;
  return SipHash24(m_key, input, sizeof(input));
}

}  // namespace timerwheel::rudp::detail
