// A set of 64-bit integers kept as disjoint, non-adjacent half-open ranges [begin, end).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace timerwheel::rudp::detail {

// Used for received packet numbers (ACK ranges), acknowledged and lost stream bytes, and the
// out-of-order parts of a receive buffer. Ranges are sorted ascending; inserting merges neighbours.
// The vector keeps its capacity, so steady-state use allocates nothing once it has grown.
// Complexity: O(log n) search plus O(n) insert/erase in the middle (n stays small in practice).
class RangeSet {
 public:
  struct Range {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;  // exclusive; begin < end
  };

  // Adds [begin, end) (begin < end). Returns the number of values that were not already present.
  std::uint64_t Insert(std::uint64_t begin, std::uint64_t end);
  // Removes [begin, end) (begin < end), splitting a range if needed.
  void Erase(std::uint64_t begin, std::uint64_t end);
  // Removes every value < end.
  void EraseBelow(std::uint64_t end);
  bool Contains(std::uint64_t value) const noexcept;
  // True if every value of [begin, end) is present.
  bool ContainsAll(std::uint64_t begin, std::uint64_t end) const noexcept;

  bool Empty() const noexcept { return m_ranges.empty(); }
  std::size_t RangeCount() const noexcept { return m_ranges.size(); }
  const Range& operator[](std::size_t index) const noexcept { return m_ranges[index]; }
  const Range& Front() const noexcept { return m_ranges.front(); }
  const Range& Back() const noexcept { return m_ranges.back(); }
  void PopFront() { m_ranges.erase(m_ranges.begin()); }
  void PopBack() noexcept { m_ranges.pop_back(); }
  void Clear() noexcept { m_ranges.clear(); }
  // Room for `count` ranges, so that growing to them allocates no more.
  std::size_t Capacity() const noexcept { return m_ranges.capacity(); }
  void Reserve(std::size_t count) { m_ranges.reserve(count); }
  // Frees the storage (idle connections keep no memory).
  void ShrinkToFit();

 private:
  std::vector<Range> m_ranges;
};

}  // namespace timerwheel::rudp::detail
