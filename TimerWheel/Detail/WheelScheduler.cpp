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
  auto walk = [&](const List& list, std::uint32_t listId, auto&& checkSlot) {
    std::uint32_t previous = kNoIndex;
    std::size_t count = 0;
    for (std::uint32_t id = list.head; id != kNoIndex; id = m_pool.NodeOf(id).next) {
      const Node& node = m_pool.NodeOf(id);
      if (node.list != listId || node.prev != previous) {
        Fail("record " + std::to_string(id) + " has list " + std::to_string(node.list) + " prev " +
             std::to_string(node.prev) + ", expected " + std::to_string(listId) + " and " +
             std::to_string(previous));
      }
      const Ticks deadline = m_pool[id].deadline + m_deadlineMargin;  // the record's has no L
      checkSlot(id, (deadline + m_granularity - 1) / m_granularity);
      previous = id;
      ++count;
    }
    if (list.tail != previous) Fail("list " + std::to_string(listId) + " has a wrong tail");
    return count;
  };

  expired = walk(Expired(), m_expiredList, [&](std::uint32_t id, Ticks slot) {
    if (slot > m_cursor) {
      Fail("record " + std::to_string(id) + " is expired but its slot " + std::to_string(slot) +
           " is after the cursor " + std::to_string(m_cursor));
    }
  });
  const std::size_t ringSlots = m_slotMask + 1;
  for (std::uint32_t index = 0; index < ringSlots; ++index) {
    const std::size_t count = walk(m_slots[index], index, [&](std::uint32_t id, Ticks slot) {
      // Never at cursor + N: the cursor's ring index holds no timer (Reschedule relies on it).
      if (slot <= m_cursor || slot >= m_cursor + ringSlots || (slot & m_slotMask) != index ||
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
  if (m_slotBefore + m_deadlineMargin + m_granularity != m_cursor * m_granularity ||
      m_nextAdvanceAt != m_cursor * m_granularity + m_granularity)
    Fail("the slot before the cursor or the next advance time is stale");
}

}  // namespace timerwheel::detail
