// The schedule behind TimerWheel: a ring of slots, one per granularity, of intrusive lists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

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
// in a slot s with cursor < s <= cursor + N, where N (a power of two >= ceil((M + L) / g) + 1, L
// the clock's lag bound that the queue adds to deadlines) is the ring size; so a slot's ring index
// s % N names exactly one s.
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
// pool's 16-byte hot records (key, prev, next), so validating a handle, testing "pending" and
// relinking touch one small record; every list (each slot's and the expired one) is circular
// through a sentinel that the pool keeps before record 0 and that is linked like a record (a
// negative link), so linking and unlinking have no head or tail cases and moving a slot onto the
// expired list is a splice; the slot is computed with a multiply by the reciprocal of g, not a
// division; the occupancy bit is set only when a slot goes from empty to occupied; and a re-arm
// that lands in the slot where the timer is already last changes no link at all (FIFO is kept: it
// would be relinked to the same place).
class WheelScheduler {
 public:
  // A record's id (>= 0), or a list's sentinel: ~i for ring index i, ~N for the expired list.
  using Link = std::int32_t;
  static constexpr Link kNotScheduled = 0x7FFFFFFF;  // the `next` of a timer that is not pending

  struct Node {
    Link prev = kNotScheduled;
    Link next = kNotScheduled;
    std::uint32_t padding = 0;  // 16-byte hot records: a record's address is a shift of its id
  };

  // The largest ring this accepts: 2^24 slots (256 MiB of sentinels).
  static constexpr std::size_t kMaximumSlots = std::size_t{1} << 24;
  // Ids are links, so at most 2^31 - 1 timers (ids below kNotScheduled).
  static constexpr std::uint32_t kMaximumTimers = 0x7FFFFFFFu;

  // `deadlineMargin` is what the queue adds to every deadline (the clock's ReadingLagBound): a
  // deadline is at most M + margin after the reading it was computed from, and the ring covers it.
  WheelScheduler(Milliseconds maximumTimeout, Milliseconds granularity, Ticks deadlineMargin,
                 Ticks now)
      : m_granularity(CheckGranularity(granularity)),
        m_maximumTimeout(CheckMaximum(maximumTimeout, granularity, deadlineMargin)),
        m_slotCount(RingSize(maximumTimeout + deadlineMargin, granularity)),
        m_pool(static_cast<std::uint32_t>(m_slotCount + 1), kMaximumTimers),
        m_slotMask(m_slotCount - 1),
        m_expiredList(~static_cast<Link>(m_slotCount)),
        m_occupied(m_slotCount),
        m_perSlot(granularity),
        m_cursor(now / granularity),
        m_slotBefore(m_cursor * granularity - granularity),
        m_nextAdvanceAt(m_cursor * granularity + granularity),
        m_earliestBound(m_cursor + 1) {
    for (Link list = m_expiredList; list < 0; ++list) MakeEmpty(list);
  }

  TimerPool<Node>& Pool() noexcept { return m_pool; }
  const TimerPool<Node>& Pool() const noexcept { return m_pool; }

  void Reserve(std::size_t) noexcept {}  // nothing grows with the number of timers

  std::size_t Size() const noexcept { return m_size; }
  bool IsScheduled(std::uint32_t id) const noexcept {
    return m_pool.NodeOf(id).next != kNotScheduled;
  }
  Milliseconds MaximumTimeout() const noexcept { return m_maximumTimeout; }
  Milliseconds Granularity() const noexcept { return m_granularity; }

  // Before Schedule and Reschedule (their deadline computed from `now`): moves the slots that
  // became due onto the expired list. At most once per slot, so the queue calls it out of line.
  bool MustAdvance(Ticks now) const noexcept { return now >= m_nextAdvanceAt; }
  TIMERWHEEL_ALWAYS_INLINE void AdvanceTo(Ticks now) noexcept {
    if (MustAdvance(now)) AdvanceCursor(now);
  }

  // Nothing is ever left out of order (the queue's Settle step is the heap's).
  static constexpr std::size_t kSettled = ~std::size_t{0};
  static void Settle(std::size_t) noexcept {}

  TIMERWHEEL_ALWAYS_INLINE std::size_t Schedule(std::uint32_t id, Ticks deadline) noexcept {
    ++m_size;
    Append(id, SlotOf(deadline));
    return kSettled;
  }

  // Advanced first (the timer's own slot may just have become due).
  TIMERWHEEL_ALWAYS_INLINE std::size_t Reschedule(std::uint32_t id, Ticks deadline) noexcept {
    const Ticks slot = SlotOf(deadline);
    // Already last in the list it would be appended to (its next is that list's sentinel):
    // relinking would change nothing.
    if (m_pool.NodeOf(id).next == ListOf(slot)) return kSettled;
    Unlink(id);
    Append(id, slot);
    return kSettled;
  }

  TIMERWHEEL_ALWAYS_INLINE std::size_t Unschedule(std::uint32_t id) noexcept {
    --m_size;
    Unlink(id);
    m_pool.NodeOf(id).next = kNotScheduled;
    return kSettled;
  }

  // The search starts at the lower bound, and is skipped while the bound's slot is occupied (the
  // common case: it is then the earliest).
  Ticks NextExpiry() noexcept {
    if (!IsEmpty(m_expiredList)) return 0;  // due already
    const auto first = static_cast<std::size_t>(m_earliestBound & m_slotMask);
    if (IsEmpty(SlotList(first))) {
      // Size() > 0 and the expired list is empty, so some slot is occupied: the loop ends.
      std::size_t found = m_occupied.FindNextCircular(first);
      while (IsEmpty(SlotList(found))) {  // a stale bit: clear it and look further
        m_occupied.Clear(found);
        found = m_occupied.FindNextCircular(first);
      }
      m_earliestBound += (found - first) & m_slotMask;
    }
    return m_earliestBound * m_granularity;
  }

  template <class OnDue>
  void DetachDue(Ticks now, OnDue&& onDue) {
    AdvanceTo(now);
    // The whole expired list goes: walk it once and drop it, rather than unlink each timer.
    // onDue must not touch the schedule (the queue's copies the record's data into its batch).
    Link id = m_pool.NodeAt(m_expiredList).next;
    MakeEmpty(m_expiredList);
    std::size_t detached = 0;  // m_size is updated once: onDue's stores might alias it
    while (id != m_expiredList) {
      Node& node = m_pool.NodeAt(id);
      const Link next = node.next;
      node.next = kNotScheduled;
      ++detached;
      onDue(static_cast<std::uint32_t>(id));
      id = next;
    }
    m_size -= detached;
  }

  void CheckInvariants() const;

 private:
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
    const std::size_t needed = static_cast<std::size_t>((span + granularity - 1) / granularity + 1);
    if (needed > kMaximumSlots) {
      throw std::invalid_argument("TimerWheel: maximum timeout / granularity needs " +
                                  std::to_string(needed) + " slots; the limit is " +
                                  std::to_string(kMaximumSlots));
    }
    std::size_t size = 1;
    while (size < needed) size *= 2;  // a power of two: ring index is a mask, not a division
    return size;
  }

  // The absolute slot of an exact deadline: ceil(deadline / g), computed from the cursor so the
  // division is 32-bit. Needs the cursor advanced to `now` <= deadline: then deadline >= cursor *
  // g, and offset = deadline - cursor * g < M + margin + g, so offset + g fits in 32 bits
  // (CheckMaximum) and the slot is at most ceil((M + margin) / g) + 1 ahead of the cursor: inside
  // the ring. offset + g is deadline - m_slotBefore (modulo 2^64, exact since it is below 2^32),
  // what the reciprocal takes for ceil(offset / g).
  Ticks SlotOf(Ticks deadline) const noexcept {
    return m_cursor + m_perSlot.DivideSuccessor(deadline - m_slotBefore);
  }

  // The sentinel of the slot at ring index `index`.
  static Link SlotList(std::size_t index) noexcept { return ~static_cast<Link>(index); }

  // The list a timer in absolute slot `slot` (cursor <= slot <= cursor + N) belongs to.
  Link ListOf(Ticks slot) const noexcept {
    return slot == m_cursor ? m_expiredList : SlotList(static_cast<std::size_t>(slot & m_slotMask));
  }

  bool IsEmpty(Link list) const noexcept { return m_pool.NodeAt(list).next == list; }
  void MakeEmpty(Link list) noexcept {
    Node& sentinel = m_pool.NodeAt(list);
    sentinel.prev = list;
    sentinel.next = list;
  }

  // Appends `id` (not in any list) to the list of `slot`, which is due already if it is the
  // cursor's (timeout 0 on a slot boundary).
  TIMERWHEEL_ALWAYS_INLINE void Append(std::uint32_t id, Ticks slot) noexcept {
    if (slot == m_cursor) {
      PushBack(m_expiredList, id);
      return;
    }
    const auto index = static_cast<std::size_t>(slot & m_slotMask);
    const Link list = SlotList(index);
    PushBack(list, id);
    // A non-empty slot has its bit set already (bits are cleared lazily, never early). Tested
    // after the link, on the record's new `prev` (the old tail: the sentinel if it was empty),
    // so no register is kept for it across the link.
    if (m_pool.NodeOf(id).prev == list) m_occupied.Set(index);
    if (slot < m_earliestBound) m_earliestBound = slot;
  }

  // Moves every slot that is due at `now` to the expired list, in slot order.
  TIMERWHEEL_NEVER_INLINE void AdvanceCursor(Ticks now) noexcept {
    const Ticks newCursor = now / m_granularity;
    // Only slots in (cursor, cursor + N] can hold timers; visit the occupied ones in order.
    const std::size_t first = static_cast<std::size_t>((m_cursor + 1) & m_slotMask);
    for (;;) {
      const std::size_t found = m_occupied.FindNextCircular(first);
      if (found == SlotBitmap::kNotFound) break;
      const Ticks slot = m_cursor + 1 + ((found - first) & m_slotMask);
      if (slot > newCursor) break;
      MoveSlotToExpired(static_cast<std::uint32_t>(found));
    }
    m_cursor = newCursor;
    m_nextAdvanceAt = newCursor * m_granularity + m_granularity;
    m_slotBefore = m_nextAdvanceAt - 2 * Ticks{m_granularity};
    if (m_earliestBound <= newCursor) m_earliestBound = newCursor + 1;
  }

  // Splices the whole slot onto the tail of the expired list (no walk: no record names its list).
  void MoveSlotToExpired(std::uint32_t index) noexcept {
    m_occupied.Clear(index);
    const Link list = SlotList(index);
    Node& slot = m_pool.NodeAt(list);
    if (slot.next == list) return;  // a stale occupancy bit
    Node& expired = m_pool.NodeAt(m_expiredList);
    const Link first = slot.next;
    const Link last = slot.prev;
    const Link tail = expired.prev;  // the expired sentinel itself if it is empty
    m_pool.NodeAt(tail).next = first;
    m_pool.NodeAt(first).prev = tail;
    m_pool.NodeAt(last).next = m_expiredList;
    expired.prev = last;
    MakeEmpty(list);
  }

  TIMERWHEEL_ALWAYS_INLINE void PushBack(Link list, std::uint32_t id) noexcept {
    Node& sentinel = m_pool.NodeAt(list);
    const Link tail = sentinel.prev;  // the sentinel itself if the list is empty
    Node& node = m_pool.NodeOf(id);
    // In this order, so that GCC does not pair the record's two stores into a vector store
    // (which costs more instructions to assemble than it saves), and stores `tail` before it
    // turns it into an address.
    node.prev = tail;
    sentinel.prev = static_cast<Link>(id);
    // An empty list's sentinel is written through its own address, not through `tail`: a store
    // whose address depends on the load of `tail` (itself often just stored by an unlink) makes a
    // chain of dependent memory accesses from one set or cancel to the next (measured: without
    // this branch the sentinels took a hot arm+cancel pair from 6.5 to 8.3-9.5 ns, at fewer
    // instructions; with it, 7.1).
    if (tail == list) {
      sentinel.next = static_cast<Link>(id);
    } else {
      m_pool.NodeAt(tail).next = static_cast<Link>(id);
    }
    node.next = list;
  }

  // Takes `id` out of its list (leaving its `next` stale for the caller to set). The occupancy
  // bit is cleared lazily, by the next search that finds the slot empty: a cancel then costs an
  // unlink only.
  TIMERWHEEL_ALWAYS_INLINE void Unlink(std::uint32_t id) noexcept {
    const Node& node = m_pool.NodeOf(id);
    const Link prev = node.prev;
    const Link next = node.next;
    m_pool.NodeAt(prev).next = next;
    m_pool.NodeAt(next).prev = prev;
  }

  const Milliseconds m_granularity;
  const Milliseconds m_maximumTimeout;
  const std::size_t m_slotCount;  // N, a power of two
  TimerPool<Node> m_pool;         // the records, after N + 1 sentinels: the lists' heads
  const Ticks m_slotMask;
  const Link m_expiredList;    // due, not yet detached; in firing order
  SlotBitmap m_occupied;       // slot i non-empty => bit i set (cleared lazily)
  const Reciprocal m_perSlot;  // division by g
  Ticks m_cursor;              // absolute slot: every slot <= it is moved to the expired list
  Ticks m_slotBefore;          // (m_cursor - 1) * g, modulo 2^64 (wraps while the cursor is 0)
  Ticks m_nextAdvanceAt;       // (m_cursor + 1) * g: the instant the next slot becomes due
  std::size_t m_size = 0;      // scheduled timers: in slots + expired
  // No slot before this absolute slot number is occupied, and it is after the cursor. A bound,
  // not the earliest slot: a link lowers it (a compare), but an unlink that empties its slot
  // leaves it (nothing to do on cancel); NextExpiry raises it to the earliest occupied slot.
  Ticks m_earliestBound;
};

}  // namespace timerwheel::detail
