// SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF"), written from the paper.
#include "ReliableUDP/Detail/SipHash.h"

#include <random>

namespace timerwheel::rudp::detail {
namespace {

inline std::uint64_t RotateLeft(std::uint64_t value, unsigned bits) noexcept {
  return (value << bits) | (value >> (64 - bits));
}

inline std::uint64_t LoadLittle64(const std::uint8_t* p) noexcept {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

struct State {
  std::uint64_t v0;
  std::uint64_t v1;
  std::uint64_t v2;
  std::uint64_t v3;

  void Round() noexcept {
    v0 += v1;
    v1 = RotateLeft(v1, 13);
    v1 ^= v0;
    v0 = RotateLeft(v0, 32);
    v2 += v3;
    v3 = RotateLeft(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = RotateLeft(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = RotateLeft(v1, 17);
    v1 ^= v2;
    v2 = RotateLeft(v2, 32);
  }

  void Compress(std::uint64_t word) noexcept {
    v3 ^= word;
    Round();
    Round();
    v0 ^= word;
  }
};

std::uint64_t RandomU64(std::random_device& device) {
  // random_device yields 32 bits per call (unsigned int); two draws fill a word.
  const std::uint64_t high = static_cast<std::uint32_t>(device());
  const std::uint64_t low = static_cast<std::uint32_t>(device());
  return (high << 32) | low;
}

}  // namespace

std::uint64_t SipHash24(const SipHashKey& key, const std::uint8_t* data,
                        std::size_t size) noexcept {
  // The constants spell "somepseudorandomlygeneratedbytes"; they only need to differ per word.
  State state{key.k0 ^ 0x736f6d6570736575ull, key.k1 ^ 0x646f72616e646f6dull,
              key.k0 ^ 0x6c7967656e657261ull, key.k1 ^ 0x7465646279746573ull};

  const std::size_t fullWords = size / 8;
  for (std::size_t i = 0; i < fullWords; ++i) state.Compress(LoadLittle64(data + 8 * i));

  // The last word carries the length (mod 256) in its top byte, so messages that differ only by
  // trailing zero bytes hash differently.
  std::uint64_t last = static_cast<std::uint64_t>(size & 0xFFu) << 56;
  const std::uint8_t* tail = data + 8 * fullWords;
  for (std::size_t i = 0; i < size % 8; ++i) last |= std::uint64_t{tail[i]} << (8 * i);
  state.Compress(last);

  state.v2 ^= 0xFFu;
  for (int i = 0; i < 4; ++i) state.Round();
  return state.v0 ^ state.v1 ^ state.v2 ^ state.v3;
}

SipHashKey RandomSipHashKey() {
  std::random_device device;
  SipHashKey key;
  key.k0 = RandomU64(device);
  key.k1 = RandomU64(device);
  return key;
}

ConnectionIdGenerator::ConnectionIdGenerator(SipHashKey key) noexcept : m_key(key) {}

std::uint64_t ConnectionIdGenerator::Next() noexcept {
  for (;;) {
    std::uint8_t counter[8];
    for (int i = 0; i < 8; ++i) counter[i] = static_cast<std::uint8_t>(m_counter >> (8 * i));
    ++m_counter;
    const std::uint64_t id = SipHash24(m_key, counter, sizeof(counter));
    if (id != 0) return id;
  }
}

}  // namespace timerwheel::rudp::detail
