// SipHash-2-4: the keyed hash behind handshake cookies and unguessable connection IDs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace timerwheel::rudp::detail {

struct SipHashKey {
  std::uint64_t k0 = 0;
  std::uint64_t k1 = 0;
};

// SipHash-2-4 with 64-bit output, as in Aumasson and Bernstein's paper: libsodium's
// crypto_shorthash, with k0 and k1 as the little-endian halves of its 16-byte key and its 8 output
// bytes read as a little-endian word. Test vector: key bytes 00..0f, message bytes 00..0e
// (15 bytes) -> 0xa129ca6149be45e5.
std::uint64_t SipHash24(const SipHashKey& key, const std::uint8_t* data, std::size_t size) noexcept;

// A key from libsodium's randombytes (the operating system's CSPRNG on Linux and Windows). Throws
// std::runtime_error if libsodium cannot be initialised (no random number source).
SipHashKey RandomSipHashKey();

// Connection IDs that an observer cannot predict: SipHash of a counter under a random key.
// Never returns 0 (0 means "no connection ID" on the wire).
class ConnectionIdGenerator {
 public:
  explicit ConnectionIdGenerator(SipHashKey key) noexcept;
  std::uint64_t Next() noexcept;
  // A second unpredictable number for the draw Next() makes next, unrelated to it (its input is a
  // byte longer, so never one of Next()'s): a second seed for whoever takes that draw, without
  // moving Next()'s sequence. Unlike Next(), it may be 0.
  std::uint64_t Companion() const noexcept;

 private:
  SipHashKey m_key;
  std::uint64_t m_counter = 0;
};

}  // namespace timerwheel::rudp::detail
