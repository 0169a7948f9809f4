// The schedule behind TimerWheel: a ring of slots, one per granularity, of intrusive lists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "TimerQueue/Core/TimerPool.h"
#include "TimerQueue/TimerTypes.h"
#include "TimerWheel/Detail/Reciprocal.h"
#include "TimerWheel/Detail/SlotBitmap.h"

namespace timerwheel::detail {

// Time is cut into slots of `g` ms; slot number s (absolute) fires at instant s * g. A timer with
// exact deadline d goes to slot ceil(d / g): the first boundary at or after d, so it never fires
// early and at most g - 1 ms late. Timers in one slot form a FIFO list, so they fire in set order.
//
// The cursor is the last slot number known to be due (floor(now / g) at the last advance). Every
// scheduled timer is either in the *expired* list (due, waiting for DetachDue; in firing order) or
// in a slot s with cursor < s < cursor + N, where N (a power of two >= ceil((M + L) / g) + 2, L
// the clock's lag bound that the queue adds to deadlines) is the ring size; so a slot's ring index
// s % N names exactly one s, and the cursor's own ring index holds no timer.
//
// No lag: every Schedule is preceded by an advance of the cursor to now (AdvanceTo), moving slots
// that became due onto the expired list. So a timeout <= M always fits in the ring, however long
// ago the last dispatch was, and the move costs O(1) per timer plus one bitmap scan per advance
// (bounded by one revolution, not by the length of a gap). Each timer is moved at most once.
//
// Costs: Schedule, Reschedule and Unschedule O(1). NextExpiry O(1) while the slot of a lower bound
// on the earliest occupied slot is occupied (a link lowers the bound with one compare, an unlink
// leaves it), otherwise one SlotBitmap search (2 words for N <= 4096) that raises the bound to
// the earliest slot and clears the stale bits of slots emptied by cancels (each bit once).
//
// The hot path, kept short because a server re-arms on almost every packet: the links live in the
// pool's 16-byte hot records (key, prev, next, list), so validating a handle, testing "pending"
// and relinking touch one small record; the slot is computed with a multiply by the reciprocal of
// g, not a division; the occupancy bit is set only when a slot goes from empty to occupied; and a
// re-arm that lands in the slot where the timer is already last changes no link at all (FIFO is
// kept: it would be relinked to the same place).
class WheelScheduler {
 public:
  struct Node {
    std::uint32_t prev = kNoIndex;
    std::uint32_t next = kNoIndex;
    std::uint32_t list = kNotScheduled;  // ring index of its slot, m_expiredList or kNotScheduled
  };

  // The largest ring this accepts: 2^24 slots (128 MiB of list heads).
  static constexpr std::size_t kMaximumSlots = std::size_t{1} << 24;

  // The queue passes now + timeout; the wheel adds the lag bound in m_slotBefore (SlotOf).
  static constexpr bool kAddsLagBound = true;

  // `deadlineMargin` is the clock's ReadingLagBound L, added to every deadline: a timer may fire
  // from now + timeout + L on, at most M + L after the reading, and the ring covers that.
  WheelScheduler(Milliseconds maximumTimeout, Milliseconds granularity, Ticks deadlineMargin,
                 Ticks now)
      : m_granularity(CheckGranularity(granularity)),
        m_maximumTimeout(CheckMaximum(maximumTimeout, granularity, deadlineMargin)),
        m_slots(RingSize(maximumTimeout + deadlineMargin, granularity) + 1),
        m_slotMask(m_slots.size() - 2),
        m_occupied(m_slots.size() - 1),
        m_expiredList(static_cast<std::uint32_t>(m_slots.size() - 1)),
        m_perSlot(granularity),
        m_deadlineMargin(deadlineMargin),
        m_cursor(now / granularity),
        m_slotBefore(m_cursor * granularity - granularity - deadlineMargin),
        m_nextAdvanceAt(m_cursor * granularity + granularity),
        m_earliestBound(m_cursor + 1) {}

  TimerPool<Node>& Pool() noexcept { return m_pool; }
  const TimerPool<Node>& Pool() const noexcept { return m_pool; }

  void Reserve(std::size_t) noexcept {}  // nothing grows with the number of timers

  std::size_t Size() const noexcept { return m_size; }
  bool IsScheduled(std::uint32_t id) const noexcept {
    return m_pool.NodeOf(id).list != kNotScheduled;
  }
  Milliseconds MaximumTimeout() const noexcept { return m_maximumTimeout; }
  Milliseconds Granularity() const noexcept { return m_granularity; }

  // Before Schedule and Reschedule (their deadline computed from `now`): moves the slots that
  // became due onto the expired list. At most once per slot, so the queue calls it out of line.
  bool MustAdvance(Ticks now) const noexcept { return now >= m_nextAdvanceAt; }
  TIMERWHEEL_ALWAYS_INLINE void AdvanceTo(Ticks now) noexcept {
    if (MustAdvance(now)) AdvanceCursor</*kMarkExpired=*/true>(now);
  }

  // Nothing is ever left out of order (the queue's Settle step is the heap's).
  static void Settle() noexcept {}
  static constexpr std::size_t kSettled = ~std::size_t{0};
  static void Settle(std::size_t) noexcept {}

  TIMERWHEEL_ALWAYS_INLINE bool Schedule(std::uint32_t id, Ticks deadline) noexcept {
    ++m_size;
    Link(id, SlotOf(deadline));
    return false;
  }

  // Advanced first (the timer's own slot may just have become due).
  TIMERWHEEL_ALWAYS_INLINE bool Reschedule(std::uint32_t id, Ticks deadline) noexcept {
    const Ticks slot = SlotOf(deadline);
    const Node& node = m_pool.NodeOf(id);
    // Already last in the list it would be appended to: relinking would change nothing. The ring
    // index alone decides it: no timer is ever at ring index cursor % N (RingSize), so a timer
    // due at once (slot == cursor) never matches and is relinked onto the expired list.
    if (node.next == kNoIndex && node.list == (slot & m_slotMask)) return false;
    Detach(id);
    Link(id, slot);
    return false;
  }

  TIMERWHEEL_ALWAYS_INLINE std::size_t Unschedule(std::uint32_t id) noexcept {
    --m_size;
    Detach(id);
    m_pool.NodeOf(id).list = kNotScheduled;
    return kSettled;
  }

  // The search starts at the lower bound, and is skipped while the bound's slot is occupied (the
  // common case: it is then the earliest).
  Ticks NextExpiry() noexcept {
    if (Expired().head != kNoIndex) return 0;  // due already
    const auto first = static_cast<std::size_t>(m_earliestBound & m_slotMask);
    if (m_slots[first].head == kNoIndex) {
      // Size() > 0 and the expired list is empty, so some slot is occupied: the loop ends.
      std::size_t found = m_occupied.FindNextCircular(first);
      while (m_slots[found].head == kNoIndex) {  // a stale bit: clear it and look further
        m_occupied.Clear(found);
        found = m_occupied.FindNextCircular(first);
      }
      m_earliestBound += (found - first) & m_slotMask;
    }
    return m_earliestBound * m_granularity;
  }

  template <class OnDue>
  void DetachDue(Ticks now, OnDue&& onDue) {
    // The slots that became due are spliced onto the expired list without marking their records
    // as expired: the walk below marks every record of that list as not scheduled, and nothing
    // reads a record's list in between (one pass over the due records fewer).
    if (MustAdvance(now)) AdvanceCursor</*kMarkExpired=*/false>(now);
    // The whole expired list goes: walk it once and drop it, rather than unlink each timer.
    // onDue must not touch the schedule (the queue's copies the record's data into its batch).
    std::uint32_t id = Expired().head;
    Expired() = List{};
    std::size_t detached = 0;              // m_size is updated once: onDue's stores might alias it
    const auto records = m_pool.Arrays();  // and the records' array is not reloaded either
    while (id != kNoIndex) {
      Node& node = records.NodeOf(id);
      const std::uint32_t next = node.next;
      node.list = kNotScheduled;
      ++detached;
      onDue(id);
      id = next;
    }
    m_size -= detached;
  }

  void CheckInvariants() const;

 private:
  static constexpr std::uint32_t kNotScheduled = kNoIndex;

  struct List {
    std::uint32_t head = kNoIndex;
    std::uint32_t tail = kNoIndex;
  };

  static Milliseconds CheckGranularity(Milliseconds granularity) {
    if (granularity == 0)
      throw std::invalid_argument("TimerWheel: granularity must be at least 1 ms");
    return granularity;
  }
  static Milliseconds CheckMaximum(Milliseconds maximumTimeout, Milliseconds granularity,
                                   Ticks deadlineMargin) {
    // Schedule's 32-bit arithmetic needs M + margin + 2g to fit in 32 bits.
    if (maximumTimeout == 0 ||
        Ticks{maximumTimeout} + deadlineMargin + 2 * Ticks{granularity} > kInfinite) {
      throw std::invalid_argument("TimerWheel: maximum timeout " + std::to_string(maximumTimeout) +
                                  " ms is out of range for granularity " +
                                  std::to_string(granularity) + " ms and a clock lag bound of " +
                                  std::to_string(deadlineMargin) + " ms");
    }
    return maximumTimeout;
  }
  // `span` is M + margin: the furthest a deadline can be from the reading it was computed from.
  static std::size_t RingSize(Ticks span, Milliseconds granularity) {
    // One slot more than the furthest a deadline can reach (ceil(span / g) + 1 ahead of the
    // cursor), so that the ring index of the cursor's own slot holds no timer: see Reschedule.
    const std::size_t needed = static_cast<std::size_t>((span + granularity - 1) / granularity + 2);
    if (needed > kMaximumSlots) {
      throw std::invalid_argument("TimerWheel: maximum timeout / granularity needs " +
                                  std::to_string(needed) + " slots; the limit is " +
                                  std::to_string(kMaximumSlots));
    }
    std::size_t size = 1;
    while (size < needed) size *= 2;  // a power of two: ring index is a mask, not a division
    return size;
  }

  // The absolute slot of a timer due at `due` (now + timeout: the queue's deadline without the
  // lag bound L): ceil((due + L) / g), computed from the cursor so the division is 32-bit. Needs
  // the cursor advanced to `now` <= due: then due + L >= cursor * g, and offset = due + L -
  // cursor * g < M + L + g, so offset + g fits in 32 bits (CheckMaximum) and the slot is at most
  // ceil((M + L) / g) + 1 ahead of the cursor: inside the ring. offset + g is due - m_slotBefore
  // (modulo 2^64, exact since it is below 2^32), what the reciprocal takes for ceil(offset / g).
  Ticks SlotOf(Ticks due) const noexcept {
    return m_cursor + m_perSlot.DivideSuccessor(due - m_slotBefore);
  }

  List& Expired() noexcept { return m_slots[m_expiredList]; }
  const List& Expired() const noexcept { return m_slots[m_expiredList]; }

  // Appends `id` (not in any list) to the list of `slot`, which is due already if it is the
  // cursor's (timeout 0 on a slot boundary).
  TIMERWHEEL_ALWAYS_INLINE void Link(std::uint32_t id, Ticks slot) noexcept {
    if (slot == m_cursor) {
      PushBack(Expired(), id, m_expiredList);
      return;
    }
    const auto index = static_cast<std::size_t>(slot & m_slotMask);
    List& list = m_slots[index];
    PushBack(list, id, static_cast<std::uint32_t>(index));
    // A non-empty slot has its bit set already (bits are cleared lazily, never early). Tested
    // after the link, on the record's new `prev` (the old tail, still in a register: the same
    // test the link made), so no register is kept for it across the link.
    if (m_pool.NodeOf(id).prev == kNoIndex) m_occupied.Set(index);
    if (slot < m_earliestBound) m_earliestBound = slot;
  }

  // Takes `id` out of its list (leaving `list` stale for the caller to set).
  TIMERWHEEL_ALWAYS_INLINE void Detach(std::uint32_t id) noexcept {
    // The expired list is the last of m_slots, so every list is reached the same way. The
    // occupancy bit is cleared lazily, by the next search that finds the slot empty: a cancel then
    // costs an unlink only.
    Unlink(m_slots[m_pool.NodeOf(id).list], id);
  }

  // Moves every slot that is due at `now` to the expired list, in slot order. kMarkExpired:
  // whether the moved records are marked as being in the expired list (not when the caller
  // detaches the whole list at once: DetachDue).
  template <bool kMarkExpired>
  TIMERWHEEL_NEVER_INLINE void AdvanceCursor(Ticks now) noexcept {
    const Ticks newCursor = now / m_granularity;
    // Only slots in (cursor, cursor + N] can hold timers; visit the occupied ones in order.
    const std::size_t first = static_cast<std::size_t>((m_cursor + 1) & m_slotMask);
    for (;;) {
      const std::size_t found = m_occupied.FindNextCircular(first);
      if (found == SlotBitmap::kNotFound) break;
      const Ticks slot = m_cursor + 1 + ((found - first) & m_slotMask);
      if (slot > newCursor) break;
      MoveSlotToExpired<kMarkExpired>(static_cast<std::uint32_t>(found));
    }
    m_cursor = newCursor;
    m_nextAdvanceAt = newCursor * m_granularity + m_granularity;
    m_slotBefore = m_nextAdvanceAt - 2 * Ticks{m_granularity} - m_deadlineMargin;
    if (m_earliestBound <= newCursor) m_earliestBound = newCursor + 1;
  }

  template <bool kMarkExpired>
  void MoveSlotToExpired(std::uint32_t index) noexcept {
    List& slot = m_slots[index];
    m_occupied.Clear(index);
    if (slot.head == kNoIndex) return;  // a stale occupancy bit
    if constexpr (kMarkExpired) {
      for (std::uint32_t id = slot.head; id != kNoIndex; id = m_pool.NodeOf(id).next) {
        m_pool.NodeOf(id).list = m_expiredList;
      }
    }
    // Splice the whole slot onto the tail of the expired list.
    List& expired = Expired();
    if (expired.tail == kNoIndex) {
      expired.head = slot.head;
    } else {
      m_pool.NodeOf(expired.tail).next = slot.head;
      m_pool.NodeOf(slot.head).prev = expired.tail;
    }
    expired.tail = slot.tail;
    slot = List{};
  }

  TIMERWHEEL_ALWAYS_INLINE void PushBack(List& list, std::uint32_t id,
                                         std::uint32_t listId) noexcept {
    // The list's tail is written first, apart from its head by the record's stores (which GCC
    // cannot prove do not alias it): written together, GCC builds the pair {id, id} in a vector
    // register on every set, for the empty list's one store.
    const std::uint32_t tail = list.tail;
    list.tail = id;
    Node& node = m_pool.NodeOf(id);
    node.list = listId;
    node.next = kNoIndex;
    node.prev = tail;
    if (tail == kNoIndex) {
      list.head = id;
    } else {
      m_pool.NodeOf(tail).next = id;
    }
  }

  TIMERWHEEL_ALWAYS_INLINE void Unlink(List& list, std::uint32_t id) noexcept {
    const Node& node = m_pool.NodeOf(id);
    if (node.prev == kNoIndex) {
      list.head = node.next;
    } else {
      m_pool.NodeOf(node.prev).next = node.next;
    }
    if (node.next == kNoIndex) {
      list.tail = node.prev;
    } else {
      m_pool.NodeOf(node.next).prev = node.prev;
    }
  }

  TimerPool<Node> m_pool;
  const Milliseconds m_granularity;
  const Milliseconds m_maximumTimeout;
  // The ring of N slots (N a power of two), then the expired list: due, not yet detached, in
  // firing order (a record's `list` names it as m_expiredList, N).
  std::vector<List> m_slots;
  const Ticks m_slotMask;
  SlotBitmap m_occupied;              // m_slots[i] non-empty => bit i set (cleared lazily)
  const std::uint32_t m_expiredList;  // N: the index of the expired list in m_slots
  const Reciprocal m_perSlot;         // division by g
  const Ticks m_deadlineMargin;       // L: the clock's lag bound, added to every due time
  Ticks m_cursor;      // absolute slot number: every slot <= it has been moved to the expired list
  Ticks m_slotBefore;  // (m_cursor - 1) * g - L, modulo 2^64 (wraps while the cursor is small)
  Ticks m_nextAdvanceAt;   // (m_cursor + 1) * g: the instant the next slot becomes due
  std::size_t m_size = 0;  // scheduled timers: in slots + expired
  // No slot before this absolute slot number is occupied, and it is after the cursor. A bound,
  // not the earliest slot: a link lowers it (a compare), but an unlink that empties its slot
  // leaves it (nothing to do on cancel); NextExpiry raises it to the earliest occupied slot.
  Ticks m_earliestBound;
};

}  // namespace timerwheel::detail
