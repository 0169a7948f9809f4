// Reading a fuzz input as a stream of small decisions, and failing loudly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace timerwheel::fuzz {

// Consumes the input front to back. Past the end every read returns 0, so an interpreter never
// needs to check for the end except to stop its main loop (Empty()).
class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size) noexcept : m_data(data), m_size(size) {}

  bool Empty() const noexcept { return m_position >= m_size; }
  std::size_t Left() const noexcept { return Empty() ? 0 : m_size - m_position; }

  std::uint8_t Byte() noexcept { return Empty() ? 0 : m_data[m_position++]; }
  bool Bool() noexcept { return (Byte() & 1) != 0; }
  // Little-endian.
  std::uint16_t U16() noexcept {
    const std::uint16_t low = Byte();
    return static_cast<std::uint16_t>(low | (Byte() << 8));
  }
  std::uint32_t U32() noexcept {
    const std::uint32_t low = U16();
    return low | (std::uint32_t{U16()} << 16);
  }
  std::uint64_t U64() noexcept {
    const std::uint64_t low = U32();
    return low | (std::uint64_t{U32()} << 32);
  }
  // A value in [0, bound) (0 if bound is 0), from as few bytes as the bound needs.
  std::uint64_t Below(std::uint64_t bound) noexcept {
    if (bound <= 1) return 0;
    if (bound <= 0x100) return Byte() % bound;
    if (bound <= 0x10000) return U16() % bound;
    if (bound <= 0x100000000) return U32() % bound;
    return U64() % bound;
  }
  // Up to `count` bytes (fewer if the input ends first).
  std::vector<std::uint8_t> Bytes(std::size_t count) {
    if (count > Left()) count = Left();
    std::vector<std::uint8_t> bytes(m_data + m_position, m_data + m_position + count);
    m_position += count;
    return bytes;
  }

 private:
  const std::uint8_t* m_data;
  std::size_t m_size;
  std::size_t m_position = 0;
};

// A finding: print what went wrong and abort (libFuzzer saves the input as a crash).
[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "FUZZ INVARIANT VIOLATED: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

inline void Check(bool condition, const char* what) {
  if (!condition) Fail(what);
}

// Little helpers for the seed generator: the inverse of FuzzInput's reads.
class FuzzOutput {
 public:
  FuzzOutput& Byte(std::uint8_t value) {
    m_bytes.push_back(value);
    return *this;
  }
  FuzzOutput& U16(std::uint16_t value) {
    return Byte(static_cast<std::uint8_t>(value)).Byte(static_cast<std::uint8_t>(value >> 8));
  }
  FuzzOutput& U32(std::uint32_t value) {
    return U16(static_cast<std::uint16_t>(value)).U16(static_cast<std::uint16_t>(value >> 16));
  }
  FuzzOutput& U64(std::uint64_t value) {
    return U32(static_cast<std::uint32_t>(value)).U32(static_cast<std::uint32_t>(value >> 32));
  }
  FuzzOutput& Bytes(const std::uint8_t* data, std::size_t size) {
    m_bytes.insert(m_bytes.end(), data, data + size);
    return *this;
  }
  FuzzOutput& Bytes(const std::vector<std::uint8_t>& bytes) {
    return Bytes(bytes.data(), bytes.size());
  }
  const std::vector<std::uint8_t>& Get() const noexcept { return m_bytes; }

 private:
  std::vector<std::uint8_t> m_bytes;
};

}  // namespace timerwheel::fuzz
