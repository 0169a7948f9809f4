// A set of 64-bit integers kept as disjoint, non-adjacent half-open ranges [begin, end).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace timerwheel::rudp::detail {

// Used for received packet numbers (ACK ranges), acknowledged and lost stream bytes, and the
// out-of-order parts of a receive buffer. Ranges are sorted ascending; inserting merges neighbours.
// The vector keeps its capacity, so steady-state use allocates nothing once it has grown.
// Complexity: O(log n) search; O(1) amortised to add or take ranges at either end (ranges taken
// off the front leave room there, reclaimed once it is half the vector); O(n) to insert or erase
// in the middle. The front matters: a sender whose peer acknowledges every other packet, then the
// rest in order, takes a range off its acknowledged set's front per packet, and a vector erased
// at its front made that O(ranges) each (4.8-5.1 us per packet at a 64 MiB send buffer,
// `TransportBenchmark --only hostile`; 53-68 ns with the room).
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

  bool Empty() const noexcept { return m_head == m_ranges.size(); }
  std::size_t RangeCount() const noexcept { return m_ranges.size() - m_head; }
  const Range& operator[](std::size_t index) const noexcept { return m_ranges[m_head + index]; }
  const Range& Front() const noexcept { return m_ranges[m_head]; }
  const Range& Back() const noexcept { return m_ranges.back(); }
  void PopFront() noexcept { DropFront(1); }
  void PopBack() noexcept {
    m_ranges.pop_back();
    if (Empty()) Clear();
  }
  void Clear() noexcept {
    m_ranges.clear();
    m_head = 0;
  }
  // Room for `count` ranges, so that growing to them allocates no more.
  std::size_t Capacity() const noexcept { return m_ranges.capacity(); }
  void Reserve(std::size_t count);
  // Frees the storage (idle connections keep no memory).
  void ShrinkToFit();

 private:
  using Iterator = std::vector<Range>::iterator;
  using ConstIterator = std::vector<Range>::const_iterator;
  Iterator Begin() noexcept { return m_ranges.begin() + static_cast<std::ptrdiff_t>(m_head); }
  ConstIterator Begin() const noexcept {
    return m_ranges.begin() + static_cast<std::ptrdiff_t>(m_head);
  }
  // Takes `count` ranges off the front: the room they leave is reclaimed once it is at least half
  // of the vector (and 16 ranges), so each range is moved O(1) times in all.
  void DropFront(std::size_t count) noexcept;
  // Moves the ranges to the vector's start (no allocation).
  void Compact() noexcept;

  // The set is m_ranges[m_head, size()); the entries before m_head are room left by the front.
  std::vector<Range> m_ranges;
  std::size_t m_head = 0;
};

}  // namespace timerwheel::rudp::detail
