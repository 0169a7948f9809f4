#include "ReliableUDP/Detail/ConnectionIdTable.h"

#include <new>
#include <utility>

namespace timerwheel::rudp::detail {

void ConnectionIdTable::Insert(ConnectionId id, std::uint32_t slot) {
  if (2 * (m_size + 1) > m_entries.size()) {
    Rebuild(m_entries.empty() ? kMinimumCapacity : 2 * m_entries.size());
  }
  Place(id, slot);
  ++m_size;
}

void ConnectionIdTable::Erase(ConnectionId id) noexcept {
  if (m_entries.empty() || id == 0) return;
  std::size_t hole = HomeOf(id);
  while (m_entries[hole].id != id) {
    if (m_entries[hole].id == 0) return;
    hole = (hole + 1) & m_mask;
  }
  // Backward shift: each later entry of the run whose home is not cyclically in (hole, next]
  // would no longer be found past the hole, so it moves into it, and the hole moves on.
  for (std::size_t next = (hole + 1) & m_mask; m_entries[next].id != 0;
       next = (next + 1) & m_mask) {
    const std::size_t home = HomeOf(m_entries[next].id);
    const bool reachableWithoutHole =
        hole < next ? (home > hole && home <= next) : (home > hole || home <= next);
    if (reachableWithoutHole) continue;
    m_entries[hole] = m_entries[next];
    hole = next;
  }
  m_entries[hole] = Entry{};
  --m_size;
}

void ConnectionIdTable::ShrinkIfSparse() noexcept {
  if (m_entries.size() <= kMinimumCapacity || 8 * m_size > m_entries.size()) return;
  std::size_t capacity = kMinimumCapacity;
  while (capacity < 4 * m_size) capacity *= 2;  // a quarter full: far from both thresholds
  try {
    Rebuild(capacity);
  } catch (const std::bad_alloc&) {
    return;  // Rebuild allocates before it changes anything: the larger table stays
  }
}

void ConnectionIdTable::Rebuild(std::size_t capacity) {
  std::vector<Entry> old(capacity);  // allocated first: the only step that can throw
  m_entries.swap(old);               // `old` now holds the entries to place again
  m_mask = capacity - 1;
  m_shift = 64;
  for (std::size_t size = capacity; size > 1; size /= 2) --m_shift;
  for (const Entry& entry : old) {
    if (entry.id != 0) Place(entry.id, entry.slot);
  }
}

void ConnectionIdTable::Place(ConnectionId id, std::uint32_t slot) noexcept {
  std::size_t index = HomeOf(id);
  while (m_entries[index].id != 0) index = (index + 1) & m_mask;
  m_entries[index] = Entry{id, slot};
}

}  // namespace timerwheel::rudp::detail
