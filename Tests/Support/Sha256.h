// SHA-256 (FIPS 180-4) for tests that compare what was sent with what arrived.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace timerwheel::test {

// Written from FIPS 180-4. The round constants and initial hash values are computed from their
// definitions (the fractional parts of the cube and square roots of the first primes) rather
// than typed in; the self-test against the standard's "abc" example guards both.
class Sha256 {
 public:
  Sha256() {
    const auto& constants = Constants();
    m_state = constants.initial;
  }

  void Update(const std::uint8_t* data, std::size_t size) {
    m_length += size;
    while (size > 0) {
      const std::size_t take = std::min(size, m_block.size() - m_used);
      for (std::size_t i = 0; i < take; ++i) m_block[m_used + i] = data[i];
      m_used += take;
      data += take;
      size -= take;
      if (m_used == m_block.size()) {
        Compress();
        m_used = 0;
      }
    }
  }

  // The digest as 64 lowercase hex digits. The object must not be used afterwards.
  std::string HexDigest() {
    const std::uint64_t bits = m_length * 8;
    const std::uint8_t one = 0x80;
    Update(&one, 1);
    const std::uint8_t zero = 0;
    while (m_used != 56) Update(&zero, 1);
    std::uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
    Update(length, 8);
    std::string hex;
    char digits[9];
    for (std::uint32_t word : m_state) {
      std::snprintf(digits, sizeof digits, "%08x", static_cast<unsigned>(word));
      hex += digits;
    }
    return hex;
  }

 private:
  struct Table {
    std::array<std::uint32_t, 64> rounds{};
    std::array<std::uint32_t, 8> initial{};
  };

  static std::uint32_t FractionBits(long double value) {
    return static_cast<std::uint32_t>((value - std::floor(value)) * 4294967296.0L);
  }

  static const Table& Constants() {
    static const Table table = [] {
      Table t;
      int found = 0;
      for (int candidate = 2; found < 64; ++candidate) {
        bool prime = true;
        for (int d = 2; d * d <= candidate; ++d) prime = prime && candidate % d != 0;
        if (!prime) continue;
        if (found < 8)
          t.initial[found] = FractionBits(std::sqrt(static_cast<long double>(candidate)));
        t.rounds[found] = FractionBits(std::cbrt(static_cast<long double>(candidate)));
        ++found;
      }
      return t;
    }();
    return table;
  }

  static std::uint32_t Rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void Compress() {
    const auto& k = Constants().rounds;
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (std::uint32_t{m_block[4 * i]} << 24) | (std::uint32_t{m_block[4 * i + 1]} << 16) |
             (std::uint32_t{m_block[4 * i + 2]} << 8) | std::uint32_t{m_block[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = m_state[0], b = m_state[1], c = m_state[2], d = m_state[3];
    std::uint32_t e = m_state[4], f = m_state[5], g = m_state[6], h = m_state[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          h + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 =
          (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    m_state[0] += a;
    m_state[1] += b;
    m_state[2] += c;
    m_state[3] += d;
    m_state[4] += e;
    m_state[5] += f;
    m_state[6] += g;
    m_state[7] += h;
  }

  std::array<std::uint32_t, 8> m_state{};
  std::array<std::uint8_t, 64> m_block{};
  std::size_t m_used = 0;
  std::uint64_t m_length = 0;
};

}  // namespace timerwheel::test
