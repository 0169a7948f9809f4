// A table of slots whose indexes never move: freed slots are reused, and free slots at the end
// are cut off once the table is sparse.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ReliableUDP/Detail/RoomForOne.h"
#include "ReliableUDP/Detail/ShrinkCapacity.h"

namespace timerwheel::rudp::detail {

// EndpointCore's connections live in slots whose index their timers carry, so a slot cannot move;
// the table gives memory back by cutting free slots off its end. Slot needs a `std::uint32_t
// generation` (moved on by the owner whenever a slot is released, so that what still names the
// old occupant can tell) and `bool InUse() const`. A slot grown after a cut starts at the highest
// generation of the slots cut so far, which every occupant they had is below: a timer expiry that
// still names a cut slot never matches its successor.
//
// Costs are O(1) amortised per call whatever the order in which slots are released. A cut leaves
// the free list's entries of the slots it removed in place, "stale", rather than filtering the list
// at once: filtering at every cut, and at every release past the sparse threshold even when nothing
// was cut, made ending connections quadratic (a million connections ending in slot order, the
// last slot's last, kept the thread busy for tens of seconds). Stale entries are filtered out in
// one pass once they are at least half of the list, and an allocation skips those it meets. The
// table grows only when the list is empty, so an index never has a stale entry and a live one at
// once.
//
// Not thread-safe: the shard's lock guards it.
template <class Slot>
class SlotTable {
 public:
  explicit SlotTable(std::size_t maximumSlots) : m_maximumSlots(maximumSlots) {}

  std::size_t Size() const noexcept { return m_slots.size(); }
  Slot& operator[](std::uint32_t index) noexcept { return m_slots[index]; }
  const Slot& operator[](std::uint32_t index) const noexcept { return m_slots[index]; }

  // A slot not in use, for the caller to fill: the one released last that the table still has,
  // else a new one. Throws std::length_error when the table is full (and changes nothing).
  std::uint32_t Allocate() {
    // The free list keeps room for every slot in use, so that Release, as a connection ends,
    // cannot fail (grown geometrically: amortised O(1)).
    MakeRoomFor(m_free, m_free.size() + m_inUse + 1);
    while (!m_free.empty()) {
      const std::uint32_t index = m_free.back();
      m_free.pop_back();
      if (index < m_slots.size()) {
        ++m_inUse;
        return index;
      }
      --m_stale;
    }
    if (m_slots.size() >= m_maximumSlots) {
      throw std::length_error("ReliableUDP: too many connections (the limit is " +
                              std::to_string(m_maximumSlots) + " slots)");
    }
    m_slots.emplace_back();
    m_slots.back().generation = m_generationFloor;
    ++m_inUse;
    return static_cast<std::uint32_t>(m_slots.size() - 1);
  }

  // `index` is no longer in use (its owner emptied it and moved its generation on). Into the
  // room Allocate made: nothing allocated.
  void Release(std::uint32_t index) noexcept {
    --m_inUse;
    m_free.push_back(index);
  }

  // Gives back the slot the last Allocate returned, before any other Allocate or Release, when
  // its owner could not finish filling it (an allocation failed): the table is as it was, and
  // nothing here allocates. The owner emptied it and moved its generation on. A slot the table
  // grew for is cut again (the list was empty); one from the list goes back to it, whose
  // capacity still holds it.
  void Unallocate(std::uint32_t index) noexcept {
    --m_inUse;
    if (m_free.empty() && index + 1 == m_slots.size()) {
      m_generationFloor = (std::max)(m_generationFloor, m_slots.back().generation);
      m_slots.pop_back();
    } else {
      m_free.push_back(index);
    }
  }

  // Cuts the free slots off the table's end once it has more than 64 slots and more than four
  // times as many as are in use.
  void ShrinkIfSparse() {
    if (m_slots.size() <= 64 || m_inUse * 4 >= m_slots.size()) return;
    std::size_t removed = 0;
    while (!m_slots.empty() && !m_slots.back().InUse()) {
      m_generationFloor = (std::max)(m_generationFloor, m_slots.back().generation);
      m_slots.pop_back();
      ++removed;
    }
    if (removed == 0) return;
    if (m_slots.capacity() > 2 * m_slots.size() + 64) ShrinkCapacity(m_slots);
    // An upper bound: a slot whose allocation's caller failed before using it has no entry.
    m_stale += removed;
    if (2 * m_stale < m_free.size()) return;
    m_filteredEntries += m_free.size();
    const std::size_t size = m_slots.size();
    m_free.erase(std::remove_if(m_free.begin(), m_free.end(),
                                [size](std::uint32_t index) { return index >= size; }),
                 m_free.end());
    m_stale = 0;
    // Smaller, but with room still for a Release of every slot in use.
    const std::size_t room = m_free.size() + m_inUse;
    if (m_free.capacity() > 2 * room + 64) ShrinkCapacity(m_free, room);
  }

  // The free list's length, stale entries included: at most twice the free slots after a cut.
  std::size_t FreeListEntries() const noexcept { return m_free.size(); }
  // The entries that filtering passes have examined so far: the cost the cuts added to releases.
  std::uint64_t FilteredEntries() const noexcept { return m_filteredEntries; }

 private:
  std::vector<Slot> m_slots;
  std::vector<std::uint32_t> m_free;  // released slots, the last released at the back
  std::size_t m_stale = 0;            // entries of m_free at or above Size()
  std::size_t m_inUse = 0;            // allocated and not yet released
  std::uint32_t m_generationFloor = 0;
  std::uint64_t m_filteredEntries = 0;
  const std::size_t m_maximumSlots;
};

}  // namespace timerwheel::rudp::detail
