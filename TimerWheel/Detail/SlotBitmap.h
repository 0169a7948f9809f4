// A two-level bitmap of occupied wheel slots: finds the next occupied slot without a rescan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "TimerQueue/Core/TimerPool.h"  // TIMERWHEEL_ALWAYS_INLINE

#ifdef _MSC_VER
#include <intrin.h>
#endif

namespace timerwheel::detail {

inline unsigned CountTrailingZeros(std::uint64_t word) noexcept {  // word != 0
#ifdef _MSC_VER
  unsigned long index;
  _BitScanForward64(&index, word);
  return static_cast<unsigned>(index);
#else
  return static_cast<unsigned>(__builtin_ctzll(word));
#endif
}

// Level 0 has a bit per slot, level 1 a bit per non-zero level-0 word. Set and Clear are O(1);
// FindNext scans at most one level-0 word plus size/4096 level-1 words (1 word for a wheel of up
// to 4096 slots, the default).
class SlotBitmap {
 public:
  static constexpr std::size_t kNotFound = ~std::size_t{0};

  explicit SlotBitmap(std::size_t bits)
      : m_bits(bits), m_level0((bits + 63) / 64, 0), m_level1((m_level0.size() + 63) / 64, 0) {}

  bool Test(std::size_t bit) const noexcept { return (m_level0[bit / 64] >> (bit % 64)) & 1u; }

  TIMERWHEEL_ALWAYS_INLINE void Set(std::size_t bit) noexcept {  // on the set path
    const std::size_t word = bit / 64;
    const std::uint64_t bits = m_level0[word];
    // Often set already: bits are cleared lazily, so a slot emptied by a cancel keeps its bit.
    if ((bits >> (bit % 64)) & 1u) return;
    // Level 1 already has the word's bit unless the word was empty.
    if (bits == 0) m_level1[word / 64] |= std::uint64_t{1} << (word % 64);
    m_level0[word] = bits | std::uint64_t{1} << (bit % 64);
  }

  void Clear(std::size_t bit) noexcept {
    const std::size_t word = bit / 64;
    m_level0[word] &= ~(std::uint64_t{1} << (bit % 64));
    if (m_level0[word] == 0) m_level1[word / 64] &= ~(std::uint64_t{1} << (word % 64));
  }

  // The first set bit at or after `from`, wrapping around to the start; kNotFound if none.
  std::size_t FindNextCircular(std::size_t from) const noexcept {
    const std::size_t found = FindNext(from);
    return found != kNotFound ? found : FindNext(0);
  }

 private:
  std::size_t FindNext(std::size_t from) const noexcept {
    if (from >= m_bits) return kNotFound;
    std::size_t word = from / 64;
    const std::uint64_t bits = m_level0[word] & (~std::uint64_t{0} << (from % 64));
    if (bits != 0) return word * 64 + CountTrailingZeros(bits);
    // Look for the next non-empty level-0 word through level 1.
    ++word;
    if (word >= m_level0.size()) return kNotFound;
    std::size_t summary = word / 64;
    std::uint64_t words = m_level1[summary] & (~std::uint64_t{0} << (word % 64));
    while (words == 0) {
      if (++summary >= m_level1.size()) return kNotFound;
      words = m_level1[summary];
    }
    word = summary * 64 + CountTrailingZeros(words);
    return word * 64 + CountTrailingZeros(m_level0[word]);
  }

  std::size_t m_bits;
  std::vector<std::uint64_t> m_level0;
  std::vector<std::uint64_t> m_level1;
};

}  // namespace timerwheel::detail
