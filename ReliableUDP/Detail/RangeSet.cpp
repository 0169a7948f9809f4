// RangeSet: sorted disjoint ranges with merge-on-insert and split-on-erase.
#include "ReliableUDP/Detail/RangeSet.h"

#include <algorithm>
#include <cassert>

namespace timerwheel::rudp::detail {

std::uint64_t RangeSet::Insert(std::uint64_t begin, std::uint64_t end) {
  assert(begin <= end);
  if (begin >= end) return 0;  // an empty range adds nothing

  // Fast path: packet numbers and in-order stream bytes arrive at or past the back.
  if (Empty() || m_ranges.back().end < begin) {
    // Room the front left is used before the vector grows.
    if (m_head != 0 && m_ranges.size() == m_ranges.capacity()) Compact();
    m_ranges.push_back({begin, end});
    return end - begin;
  }

  // The first range that touches or follows [begin, end): its end reaches begin (adjacent counts,
  // so that adjacent ranges merge and the set stays non-adjacent).
  auto first = std::lower_bound(Begin(), m_ranges.end(), begin,
                                [](const Range& r, std::uint64_t v) { return r.end < v; });
  // One past the last range that touches [begin, end): its begin is at most end.
  auto last = first;
  std::uint64_t overlap = 0;
  while (last != m_ranges.end() && last->begin <= end) {
    const std::uint64_t lo = std::max(last->begin, begin);
    const std::uint64_t hi = std::min(last->end, end);
    if (hi > lo) overlap += hi - lo;
    ++last;
  }
  if (first == last) {  // touches nothing: a new range in the gap
    if (first == Begin() && m_head != 0) {
      m_ranges[--m_head] = Range{begin, end};  // before the front, in the room it left
    } else {
      m_ranges.insert(first, Range{begin, end});
    }
    return end - begin;
  }
  // Merge [first, last) and [begin, end) into *first; drop the rest.
  first->begin = std::min(first->begin, begin);
  first->end = std::max((last - 1)->end, end);
  m_ranges.erase(first + 1, last);
  return (end - begin) - overlap;
}

void RangeSet::Erase(std::uint64_t begin, std::uint64_t end) {
  assert(begin <= end);
  if (begin >= end) return;
  // The first range with a value >= begin.
  auto it = std::upper_bound(Begin(), m_ranges.end(), begin,
                             [](std::uint64_t v, const Range& r) { return v < r.end; });
  if (it == m_ranges.end() || it->begin >= end) return;
  if (it->begin < begin && it->end > end) {  // strictly inside one range: split it in two
    if (it == Begin() && m_head != 0) {      // the lower part goes into the room at the front
      m_ranges[--m_head] = Range{it->begin, begin};
      it->begin = end;
      return;
    }
    const Range tail{end, it->end};
    it->end = begin;
    m_ranges.insert(it + 1, tail);
    return;
  }
  if (it->begin < begin) {  // keep the part of the first range below begin
    it->end = begin;
    ++it;
  }
  const auto eraseFirst = it;
  while (it != m_ranges.end() && it->end <= end) ++it;
  if (it != m_ranges.end() && it->begin < end) it->begin = end;  // keep the part at or above end
  if (eraseFirst == Begin()) {
    DropFront(static_cast<std::size_t>(it - eraseFirst));
  } else {
    m_ranges.erase(eraseFirst, it);
  }
}

void RangeSet::EraseBelow(std::uint64_t end) {
  // The ranges wholly below end form a prefix; the next one may need trimming.
  auto it = std::upper_bound(Begin(), m_ranges.end(), end,
                             [](std::uint64_t v, const Range& r) { return v < r.end; });
  if (it != m_ranges.end() && it->begin < end) it->begin = end;
  DropFront(static_cast<std::size_t>(it - Begin()));
}

bool RangeSet::Contains(std::uint64_t value) const noexcept {
  // The last range starting at or below value is the only candidate.
  auto it = std::upper_bound(Begin(), m_ranges.end(), value,
                             [](std::uint64_t v, const Range& r) { return v < r.begin; });
  if (it == Begin()) return false;
  --it;
  return value < it->end;
}

bool RangeSet::ContainsAll(std::uint64_t begin, std::uint64_t end) const noexcept {
  if (begin >= end) return true;
  // Ranges are non-adjacent, so a fully present [begin, end) lies inside a single range.
  auto it = std::upper_bound(Begin(), m_ranges.end(), begin,
                             [](std::uint64_t v, const Range& r) { return v < r.begin; });
  if (it == Begin()) return false;
  --it;
  return end <= it->end;
}

void RangeSet::Reserve(std::size_t count) {
  Compact();
  m_ranges.reserve(count);
}

void RangeSet::ShrinkToFit() {
  // shrink_to_fit is only a request; swapping with an empty vector is guaranteed to free.
  if (Empty()) {
    std::vector<Range>().swap(m_ranges);
    m_head = 0;
  } else {
    Compact();
    m_ranges.shrink_to_fit();
  }
}

void RangeSet::DropFront(std::size_t count) noexcept {
  m_head += count;
  if (Empty()) {
    Clear();
  } else if (m_head >= 16 && 2 * m_head >= m_ranges.size()) {
    Compact();
  }
}

void RangeSet::Compact() noexcept {
  if (m_head == 0) return;
  std::move(Begin(), m_ranges.end(), m_ranges.begin());
  m_ranges.resize(m_ranges.size() - m_head);  // shrinking: no allocation
  m_head = 0;
}

}  // namespace timerwheel::rudp::detail
