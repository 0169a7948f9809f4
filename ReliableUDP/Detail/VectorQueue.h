// A first-in first-out queue over one vector and a head index, with access by position.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/RoomForOne.h"

namespace timerwheel::rudp::detail {

// For a connection's queues of pending operations (sends and receives) and its stream buffers'
// chunks (in stream order from the lowest offset held): popping moves a head index, and once the
// queue is empty the vector is cleared, so a warm queue keeps its capacity (no allocation in steady
// state). Items popped stay in the vector (moved-from, if the caller moved them out) until it
// empties, or until they are half of it, when the rest move down. Before, nothing moved until the
// queue emptied: a queue that never empties (an application keeping two operations outstanding)
// grew by one item per operation for the life of the stream; and the stream buffers, which erased
// freed chunks from the front of a vector, shifted every pointer behind them, quadratic per window
// (13 µs a message at a 256 MiB window). So the vector holds at most twice the queued items, or
// them and fewer than kCompactFrom popped ones. Not thread-safe. Push and Pop amortised O(1) (a
// compaction moves at most as many items as were popped since the last one); a position is an
// index from the front, valid until the next Pop.
template <class T>
class VectorQueue {
  static_assert(std::is_nothrow_move_assignable_v<T>, "Pop compacts, and must not throw");

 public:
  static constexpr std::size_t kCompactFrom = 16;  // popped items kept before a compaction

  bool Empty() const noexcept { return m_head == m_items.size(); }
  std::size_t Size() const noexcept { return m_items.size() - m_head; }

  T& Front() noexcept { return m_items[m_head]; }
  T& operator[](std::size_t position) noexcept { return m_items[m_head + position]; }
  const T& operator[](std::size_t position) const noexcept { return m_items[m_head + position]; }
  void Push(T item) { m_items.push_back(std::move(item)); }
  // Room for one more item: a Push after it does not throw (if T's move does not).
  void MakeRoomForOne() { detail::MakeRoomForOne(m_items); }
  // The same, grown as Push alone would grow it (detail::MakeRoomForOneTight).
  void MakeRoomForOneTight() { detail::MakeRoomForOneTight(m_items); }
  // Grows the queue to `size` items, the new ones value-initialised.
  void GrowTo(std::size_t size) {
    if (size > Size()) m_items.resize(m_head + size);
  }
  void Pop() noexcept { Pop(1); }
  void Pop(std::size_t count) noexcept {
    m_head += count;
    if (m_head == m_items.size()) {
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
  const T* begin() const noexcept { return m_items.data() + m_head; }
  const T* end() const noexcept { return m_items.data() + m_items.size(); }

 private:
  std::vector<T> m_items;
  std::size_t m_head = 0;
};

}  // namespace timerwheel::rudp::detail
