// A first-in first-out queue over one vector and a head index.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace timerwheel::rudp::detail {

// For queues that fill and then drain completely (pending sends and receives, handshake
// expiries): popping moves a head index, and once the queue is empty the vector is cleared, so
// nothing is ever shifted and a warm queue keeps its capacity (no allocation in steady state).
// Items popped stay in the vector (moved-from, if the caller moved them out) until it empties.
// Not thread-safe. Push amortised O(1); Pop O(1) (O(n) destructions when it empties).
template <class T>
class VectorQueue {
 public:
  bool Empty() const noexcept { return m_head == m_items.size(); }
  std::size_t Size() const noexcept { return m_items.size() - m_head; }

  T& Front() noexcept { return m_items[m_head]; }
  void Push(T item) { m_items.push_back(std::move(item)); }
  void Pop() noexcept {
    if (++m_head == m_items.size()) Clear();
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
