// The schedule behind TimerQueue: an indexed 4-ary min-heap of deadlines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "TimerQueue/Core/TimerPool.h"
#include "TimerQueue/TimerTypes.h"

namespace timerwheel::detail {

// Each heap entry carries its own key (deadline, then a set-order sequence number for FIFO ties),
// so sifting compares entries in one contiguous array without touching records; each record knows
// its entry's position, so Reschedule and Unschedule need no search.
//
// Complexity: Schedule, Reschedule, Unschedule O(log4 n); NextExpiry O(1); DetachDue O(k log4 n)
// for k due timers. A 4-ary heap is half as deep as a binary one and its four children share a
// cache line (4 x 24 bytes), which is what matters once the heap no longer fits in cache.
class HeapScheduler {
 public:
  struct Node {
    // The entry holds the deadline: the pool's records do not (32 bytes, not 40).
    static constexpr bool kRecordHoldsDeadline = false;
    std::uint32_t heapIndex = kNoIndex;
  };

  static constexpr bool kAddsLagBound = false;  // deadlines come with it (exact, as they fire)

  HeapScheduler() = default;

  TimerPool<Node>& Pool() noexcept { return m_pool; }
  const TimerPool<Node>& Pool() const noexcept { return m_pool; }

  // The entries are an array of fixed capacity with a count, not a vector: Schedule then has no
  // growth path (and its call) to save registers for, and the size is a load, not a pointer
  // difference divided by 24. Before the root sits a sentinel entry with the earliest deadline
  // there is, 0: the root's parent in ParentOrSentinel, so that placing an entry needs no test
  // for the root.
  void Reserve(std::size_t records) {
    if (records <= m_capacity) return;
    Entry* const allocated = new Entry[records + 1];  // not initialised: written before read
    allocated[0] = {0, kNoIndex, 0};
    Entries entries(allocated + 1);
    if (m_count != 0) std::memcpy(entries.get(), m_entries.get(), m_count * sizeof(Entry));
    m_entries = std::move(entries);
    m_capacity = records;
  }

  std::size_t Size() const noexcept { return m_count; }

  // A scheduled record's deadline is its entry's (the record has none).
  Ticks DeadlineOf(std::uint32_t id) const noexcept {
    return m_entries[m_pool.NodeOf(id).heapIndex].deadline;
  }

  bool IsScheduled(std::uint32_t id) const noexcept {
    return m_pool.NodeOf(id).heapIndex != kNoIndex;
  }

  Milliseconds MaximumTimeout() const noexcept { return kInfinite - 1; }

  // Deadlines are exact: nothing to catch up with.
  static constexpr bool MustAdvance(Ticks) noexcept { return false; }
  static void AdvanceTo(Ticks) noexcept {}

  // Schedule, Reschedule and Unschedule do the common cases (a new timer no earlier than its
  // parent, a re-armed leaf, removing the last entry) without touching another entry and without
  // a call. Otherwise Schedule and Reschedule keep the position whose entry may be out of order
  // (m_unsettled) and return true, and Unschedule returns that position (kSettled: none). The
  // queue then calls Settle out of line, as its last step, so that no set or cancel saves and
  // restores registers for the sifts.
  TIMERWHEEL_ALWAYS_INLINE bool Schedule(std::uint32_t id, Ticks deadline) noexcept {
    const std::size_t position = m_count++;  // capacity reserved for every record
    m_entries[position] = {deadline, id, m_nextSequence++};
    // Its sequence number is the largest, so it goes up only if strictly earlier than its parent.
    if (deadline < ParentOrSentinel(position).deadline) return Unsettled(position);
    m_pool.NodeOf(id).heapIndex = static_cast<std::uint32_t>(position);
    return false;
  }

  TIMERWHEEL_ALWAYS_INLINE bool Reschedule(std::uint32_t id, Ticks deadline) noexcept {
    const std::size_t position = m_pool.NodeOf(id).heapIndex;
    Entry& entry = m_entries[position];
    // The new sequence number is larger than every other, so the key moves up only if the
    // deadline is strictly earlier.
    const bool earlier = deadline < entry.deadline;
    entry.deadline = deadline;
    entry.sequence = m_nextSequence++;
    if (earlier) {
      if (deadline < ParentOrSentinel(position).deadline) return Unsettled(position);
    } else if (position * kArity + 1 < m_count) {  // a leaf has nothing to sift past
      return Unsettled(position);
    }
    return false;
  }

  // Returns the position left out of order, kSettled if none: the cancel passes it to Settle in a
  // register (keeping it in m_unsettled would cost a store and a load on W3's path).
  TIMERWHEEL_ALWAYS_INLINE std::size_t Unschedule(std::uint32_t id) noexcept {
    const std::size_t position = m_pool.NodeOf(id).heapIndex;
    m_pool.NodeOf(id).heapIndex = kNoIndex;
    const std::size_t lastPosition = --m_count;
    if (position == lastPosition) return kSettled;  // it was the last entry
    m_entries[position] = m_entries[lastPosition];  // its record's heapIndex is set by Settle
    return position;
  }
  static constexpr std::size_t kSettled = ~std::size_t{0};

  // Moves the entry that Schedule or Reschedule left out of order up or down to where it belongs.
  TIMERWHEEL_NEVER_INLINE void Settle() noexcept { Settle(m_unsettled); }

  // Moves the entry at `position` up or down to where it belongs (and tells its record).
  TIMERWHEEL_NEVER_INLINE void Settle(std::size_t position) noexcept {
    if (position != 0 && Less(m_entries[position], m_entries[Parent(position)])) {
      SiftUp(position);
    } else {
      SiftDown(position);
    }
  }

  Ticks NextExpiry() const noexcept { return m_entries[0].deadline; }

  template <class OnDue>
  void DetachDue(Ticks now, OnDue&& onDue) {
    while (m_count != 0 && m_entries[0].deadline <= now) {
      const std::uint32_t id = m_entries[0].id;
      m_pool.NodeOf(id).heapIndex = kNoIndex;
      const std::size_t lastPosition = --m_count;
      if (lastPosition != 0) {  // the last entry takes the root's place and goes down
        m_entries[0] = m_entries[lastPosition];
        SiftDown(0);
      }
      onDue(id);
    }
  }

  void CheckInvariants() const {
    for (std::size_t i = 0; i < m_count; ++i) {
      if (m_pool.NodeOf(m_entries[i].id).heapIndex != i) {
        throw std::logic_error("heap: record " + std::to_string(m_entries[i].id) +
                               " thinks it is at " +
                               std::to_string(m_pool.NodeOf(m_entries[i].id).heapIndex) + ", not " +
                               std::to_string(i));
      }
      if (i != 0 && Less(m_entries[i], m_entries[Parent(i)])) {
        throw std::logic_error("heap: entry " + std::to_string(i) + " (deadline " +
                               std::to_string(m_entries[i].deadline) + ") is before its parent");
      }
    }
  }

 private:
  static constexpr std::size_t kArity = 4;

  // The id between the two keys: GCC then stores a new entry's fields one by one rather than
  // assembling deadline and sequence in a vector register (more instructions than the stores).
  struct Entry {
    Ticks deadline;
    std::uint32_t id;
    std::uint64_t sequence;  // set order, for FIFO among equal deadlines; never wraps
  };

  static bool Less(const Entry& a, const Entry& b) noexcept {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence);
  }
  static std::size_t Parent(std::size_t i) noexcept { return (i - 1) / kArity; }
  // The entry's parent, or the sentinel for the root: an arithmetic shift rounds -1 / 4 down.
  const Entry& ParentOrSentinel(std::size_t i) const noexcept {
    static_assert(kArity == 4);
    return m_entries.get()[(static_cast<std::ptrdiff_t>(i) - 1) >> 2];
  }

  bool Unsettled(std::size_t position) noexcept {
    m_unsettled = position;
    return true;
  }

  void Place(std::size_t position, const Entry& entry) noexcept {
    m_entries[position] = entry;
    m_pool.NodeOf(entry.id).heapIndex = static_cast<std::uint32_t>(position);
  }

  TIMERWHEEL_NEVER_INLINE void SiftUp(std::size_t position) noexcept {
    const Entry moving = m_entries[position];
    while (position != 0) {
      const std::size_t parent = Parent(position);
      if (!Less(moving, m_entries[parent])) break;
      Place(position, m_entries[parent]);
      position = parent;
    }
    Place(position, moving);
  }

  TIMERWHEEL_NEVER_INLINE void SiftDown(std::size_t position) noexcept {
    const Entry moving = m_entries[position];
    const std::size_t size = m_count;
    for (;;) {
      const std::size_t first = position * kArity + 1;
      if (first >= size) break;
      const std::size_t end = first + kArity < size ? first + kArity : size;
      std::size_t smallest = first;
      for (std::size_t child = first + 1; child < end; ++child) {
        if (Less(m_entries[child], m_entries[smallest])) smallest = child;
      }
      if (!Less(m_entries[smallest], moving)) break;
      Place(position, m_entries[smallest]);
      position = smallest;
    }
    Place(position, moving);
  }

  TimerPool<Node> m_pool;
  // The heap: m_count entries of m_capacity, after the sentinel (which the deleter frees too).
  struct FreeWithSentinel {
    void operator()(Entry* entries) const noexcept { delete[](entries - 1); }
  };
  using Entries = std::unique_ptr<Entry[], FreeWithSentinel>;
  Entries m_entries;
  std::size_t m_capacity = 0;
  std::size_t m_count = 0;
  std::uint64_t m_nextSequence = 0;
  std::size_t m_unsettled = 0;  // the entry out of order until Settle
};

}  // namespace timerwheel::detail
