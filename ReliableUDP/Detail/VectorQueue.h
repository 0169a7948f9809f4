// A first-in first-out queue over one vector and a head index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

namespace timerwheel::rudp::detail {

// For queues of pending operations (a connection's sends and receives): popping moves a head
// index, and once the queue is empty the vector is cleared, so a warm queue keeps its capacity (no
// allocation in steady state). Items popped stay in the vector (moved-from, if the caller moved
// them out) until it empties, or until they are half of it: a queue that never empties (an
// application that keeps two operations outstanding, re-posting one as each completes) then moves
// its items down, instead of growing by one item per operation for the life of the stream. So the
// vector holds at most twice the queued items, or them and fewer than kCompactFrom popped ones.
// Not thread-safe. Push and Pop amortised O(1) (a compaction moves at most as many items as were
// popped since the last one).
template <class T>
class VectorQueue {
  static_assert(std::is_nothrow_move_assignable_v<T>, "Pop compacts, and must not throw");

 public:
  static constexpr std::size_t kCompactFrom = 16;  // popped items kept before a compaction

  bool Empty() const noexcept { return m_head == m_items.size(); }
  std::size_t Size() const noexcept { return m_items.size() - m_head; }

  T& Front() noexcept { return m_items[m_head]; }
  void Push(T item) { m_items.push_back(std::move(item)); }
  void Pop() noexcept {
    if (++m_head == m_items.size()) {
      Clear();
    } else if (m_head >= kCompactFrom && 2 * m_head >= m_items.size()) {
      std::move(m_items.begin() + static_cast<std::ptrdiff_t>(m_head), m_items.end(),
                m_items.begin());
      m_items.erase(m_items.end() - static_cast<std::ptrdiff_t>(m_head), m_items.end());
      m_head = 0;
    }
  }
  void Clear() noexcept {
    m_items.clear();
    m_head = 0;
  }
  // Gives the memory back if the queue is empty (a connection gone quiet).
  void ReleaseMemoryIfEmpty() {
    if (!Empty()) return;
    Clear();
    m_items.shrink_to_fit();
  }

  // The items still queued, front first.
  T* begin() noexcept { return m_items.data() + m_head; }
  T* end() noexcept { return m_items.data() + m_items.size(); }

 private:
  std::vector<T> m_items;
  std::size_t m_head = 0;
};

}  // namespace timerwheel::rudp::detail
