#include "TimerWheel/Detail/WheelScheduler.h"

namespace timerwheel::detail {

namespace {
[[noreturn]] void Fail(const std::string& what) {
  throw std::logic_error("timer wheel invariant violated: " + what);
}
}  // namespace

void WheelScheduler::CheckInvariants() const {
  std::size_t inSlots = 0;
  std::size_t expired = 0;
  // Walks a list from its sentinel: every link names a record, each record's prev is the one
  // before it, the sentinel's prev is the last, and the walk ends (no more records than pending).
  auto walk = [&](Link list, auto&& checkSlot) {
    Link previous = list;
    std::size_t count = 0;
    for (Link id = m_pool.NodeAt(list).next; id != list; id = m_pool.NodeAt(id).next) {
      if (id < 0 || static_cast<std::size_t>(id) >= m_pool.Size() || count == m_size) {
        Fail("list " + std::to_string(list) + " links to " + std::to_string(id) + " after " +
             std::to_string(count) + " records");
      }
      const Node& node = m_pool.NodeAt(id);
      if (node.prev != previous) {
        Fail("record " + std::to_string(id) + " in list " + std::to_string(list) + " has prev " +
             std::to_string(node.prev) + ", expected " + std::to_string(previous));
      }
      const Ticks deadline = m_pool[static_cast<std::uint32_t>(id)].deadline;
      checkSlot(id, (deadline + m_granularity - 1) / m_granularity);
      previous = id;
      ++count;
    }
    if (m_pool.NodeAt(list).prev != previous)
      Fail("list " + std::to_string(list) + " has a wrong tail");
    return count;
  };

  expired = walk(m_expiredList, [&](Link id, Ticks slot) {
    if (slot > m_cursor) {
      Fail("record " + std::to_string(id) + " is expired but its slot " + std::to_string(slot) +
           " is after the cursor " + std::to_string(m_cursor));
    }
  });
  for (std::size_t index = 0; index < m_slotCount; ++index) {
    const std::size_t count = walk(SlotList(index), [&](Link id, Ticks slot) {
      if (slot <= m_cursor || slot > m_cursor + m_slotCount || (slot & m_slotMask) != index ||
          slot < m_earliestBound) {
        Fail("record " + std::to_string(id) + " with slot " + std::to_string(slot) +
             " is in ring index " + std::to_string(index) + " (cursor " + std::to_string(m_cursor) +
             ", earliest-slot bound " + std::to_string(m_earliestBound) + ")");
      }
    });
    if (count != 0 && !m_occupied.Test(index)) {
      Fail("occupied slot " + std::to_string(index) + " has no occupancy bit");
    }
    inSlots += count;
  }
  if (inSlots + expired != m_size) {
    Fail("counts: " + std::to_string(inSlots) + " in slots and " + std::to_string(expired) +
         " expired, but m_size " + std::to_string(m_size));
  }
  if (m_earliestBound <= m_cursor) Fail("the earliest-slot bound is not after the cursor");
  if (m_slotBefore + m_granularity != m_cursor * m_granularity ||
      m_nextAdvanceAt != m_cursor * m_granularity + m_granularity)
    Fail("the slot before the cursor or the next advance time is stale");
}

}  // namespace timerwheel::detail
