// The pool of timer records behind every queue: a slot map of records indexed by TimerHandle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "TimerQueue/ITimer.h"
#include "TimerQueue/InvalidTimerHandle.h"
#include "TimerQueue/TimerHandle.h"
#include "TimerQueue/TimerTypes.h"

// For the few small functions of the set/cancel path that the compiler would otherwise call out
// of line (measured: each call costs the hot path its register saves and restores).
#if defined(_MSC_VER) && !defined(__clang__)
#define TIMERWHEEL_ALWAYS_INLINE __forceinline
#define TIMERWHEEL_NEVER_INLINE __declspec(noinline)
#else
#define TIMERWHEEL_ALWAYS_INLINE inline __attribute__((always_inline))
#define TIMERWHEEL_NEVER_INLINE __attribute__((noinline))
#endif
// For SetTimer and CancelTimer of the concrete queues: inlined into a caller that names the
// concrete type (TimerWheel, TimerQueue), as a header-only wheel's operations would be, which
// saves the call, its argument moves and the register saves around it; a call through
// ITimerQueue& is virtual either way. MSVC is left to choose, so that its warning for a
// __forceinline it did not honour (C4714, level 4) cannot fail a /W4 /WX build.
#if defined(_MSC_VER) && !defined(__clang__)
#define TIMERWHEEL_INLINE_FOR_DIRECT_CALLS
#else
#define TIMERWHEEL_INLINE_FOR_DIRECT_CALLS __attribute__((always_inline))
#endif
// And for the rare paths the compiler would otherwise inline into them: their register needs then
// make every call save and restore registers that only the rare path uses.
// TIMERWHEEL_REJECT: a function that only throws but is declared to return, so that a caller
// returning its result jumps to it (a call would need an aligned stack frame). GCC would find
// that it never returns and call it; noipa hides that.
#if defined(__GNUC__) && !defined(__clang__)
#define TIMERWHEEL_REJECT __attribute__((noipa))
#else
#define TIMERWHEEL_REJECT TIMERWHEEL_NEVER_INLINE
#endif

namespace timerwheel::detail {

inline constexpr std::uint32_t kNoIndex = 0xFFFFFFFFu;
// Generations run 1..kLastGeneration; 0 is the null handle's, and kNoHandle (never a generation)
// is the key of a record that no live handle names.
inline constexpr std::uint32_t kLastGeneration = 0xFFFFFFFEu;
inline constexpr std::uint32_t kNoHandle = 0xFFFFFFFFu;

// What a timer calls when it fires: the "active" data of a pending timer, and the "timed-out"
// copy that travels in the dispatch batch.
struct TimerData {
  ITimer* timer = nullptr;
  UserData userData = 0;
};

// Record state bits (in the cold part; whether a timer is pending is the scheduler's, in `node`).
enum RecordFlag : std::uint8_t {
  kAllocated = 1,       // in use (not on the free list)
  kHandleReleased = 2,  // no user handle refers to it any more (destroyed, or a one-shot)
};

// The part of a record that every call touches: handle validation, the pending test and the
// scheduler's links (`Node`: heap position, or wheel links and slot). Small, so that at a million
// timers the array of these stays in the last-level cache (16 bytes for the wheel).
template <class Node>
struct HotRecord {
  std::uint32_t key = kNoHandle;  // the generation of the live user handle, or kNoHandle
  Node node{};
};

// The part touched only when a timer is armed, fired, created or freed: 32 bytes, aligned to 32
// so that no record straddles two cache lines (a record at a random index is then one line, not
// two in half the cases). The heap's: the heap's entries hold the deadline, so its records have
// room for the last batch entry.
struct alignas(32) ColdRecord {
  TimerData active;
  // Allocated: the sequence number of the last dispatch-batch entry that named the record (0:
  // none; the queue counts entries from 1, so it knows whether the batch still refers to the
  // record without a count to keep up on every fired timer). Free: the next free record. One
  // field for both.
  std::uint64_t lastBatchEntry = 0;
  std::uint32_t generation = 1;  // of the next (or current) handle; bumped on free, never wraps
  std::uint8_t flags = 0;
};

// For a scheduler whose order is coarser than deadlines (the wheel's slots): the exact deadline,
// written by every set, read by UpdateTimer's NewTimeIsSooner/Later, in the place of the last
// batch entry, which the pool then keeps in an array of its own (touched only by dispatch,
// destroy, allocate and free): a set writes the active data and the deadline, 24 bytes in one
// line, and a million records are 32 MB, not 40.
struct alignas(32) ColdRecordWithDeadline {
  TimerData active;
  Ticks deadline = 0;            // exact set time + timeout, while pending
  std::uint32_t generation = 1;  // of the next (or current) handle; bumped on free, never wraps
  std::uint8_t flags = 0;
};
static_assert(sizeof(ColdRecord) == 32 && sizeof(ColdRecordWithDeadline) == 32);

// Node::kRecordHoldsDeadline, true where the Node does not say.
template <class Node, class = void>
struct RecordHoldsDeadline : std::true_type {};
template <class Node>
struct RecordHoldsDeadline<Node, std::void_t<decltype(Node::kRecordHoldsDeadline)>>
    : std::bool_constant<Node::kRecordHoldsDeadline> {};

// A slot map: records live in two parallel vectors (hot and cold) and are reused LIFO from a free
// list, so steady-state create/destroy allocates nothing and reused records are cache-warm.
// Records are addressed by index (the vectors may reallocate while they grow: never keep a
// reference across an Allocate).
//
// Validation of a handle is O(1) and touches only the hot record: a bounds check and one compare
// of the handle's generation with the record's key. The key equals the generation only while the
// handle is live (allocated, not released); every other state stores kNoHandle, which no handle
// carries, so one compare covers "destroyed", "stale", "free" and "one-shot".
template <class Node>
class TimerPool {
 public:
  using Hot = HotRecord<Node>;
  static constexpr bool kRecordsHoldDeadlines = RecordHoldsDeadline<Node>::value;
  using Cold = std::conditional_t<kRecordsHoldDeadlines, ColdRecordWithDeadline, ColdRecord>;

  void Reserve(std::size_t records) {
    m_hot.reserve(records);
    m_cold.reserve(records);
    if constexpr (kRecordsHoldDeadlines) m_lastBatchEntries.reserve(records);
  }

  // Records there is room for without reallocating: schedulers size their own arrays to it.
  std::size_t Capacity() const noexcept {
    std::size_t capacity =
        m_hot.capacity() < m_cold.capacity() ? m_hot.capacity() : m_cold.capacity();
    if constexpr (kRecordsHoldDeadlines) {
      if (m_lastBatchEntries.capacity() < capacity) capacity = m_lastBatchEntries.capacity();
    }
    return capacity;
  }
  std::size_t Size() const noexcept { return m_size; }

  // A record for a new timer; its handle (HandleOf) is live until Release or Free.
  std::uint32_t Allocate() {
    std::uint32_t id = m_freeHead;
    if (id != kNoIndex) {
      m_freeHead = static_cast<std::uint32_t>(LastBatchEntry(id));  // the next free one
    } else {
      if (m_size == kNoIndex) throw std::length_error("timer pool is full");
      m_cold.emplace_back();
      try {
        m_hot.emplace_back();
        try {
          if constexpr (kRecordsHoldDeadlines) m_lastBatchEntries.emplace_back();
        } catch (...) {
          m_hot.pop_back();
          throw;
        }
      } catch (...) {
        m_cold.pop_back();
        throw;
      }
      id = m_size++;
    }
    Cold& cold = m_cold[id];
    cold.flags = kAllocated;
    LastBatchEntry(id) = 0;
    m_hot[id].key = cold.generation;
    return id;
  }

  // No handle names the record any more (it stays allocated until Free).
  void Release(std::uint32_t id) noexcept {
    m_hot[id].key = kNoHandle;
    m_cold[id].flags |= kHandleReleased;
  }

  void Free(std::uint32_t id) noexcept {
    Cold& record = m_cold[id];
    m_hot[id].key = kNoHandle;
    record.flags = 0;
    record.active = {};
    // Bump the generation so every copy of the old handle is stale. A slot whose generation has
    // run out is retired (never reused) rather than wrapped: a handle kept from 2^32 reuses ago
    // must not come back to life. That costs one record per 2^32 frees of one slot.
    if (record.generation == kLastGeneration) return;
    ++record.generation;
    LastBatchEntry(id) = m_freeHead;  // free: the next free record
    m_freeHead = id;
  }

  // The record a handle names, or InvalidTimerHandle if it is null, destroyed or stale.
  TIMERWHEEL_ALWAYS_INLINE std::uint32_t IdOf(TimerHandle handle) const {
    const std::uint64_t bits = BitsOf(handle);
    const auto id = static_cast<std::uint32_t>(bits);
    if (id >= m_size || m_hot[id].key != static_cast<std::uint32_t>(bits >> 32))
      ThrowInvalid(handle);
    return id;
  }

  // Whether the handle is live; if it is, `id` is the record it names.
  TIMERWHEEL_ALWAYS_INLINE bool Find(TimerHandle handle, std::uint32_t& id) const noexcept {
    const std::uint64_t bits = BitsOf(handle);
    id = static_cast<std::uint32_t>(bits);
    return id < m_size && m_hot[id].key == static_cast<std::uint32_t>(bits >> 32);
  }

  // Find, against a bound `limit` <= Size() that the caller keeps (a queue's plain-path limits).
  TIMERWHEEL_ALWAYS_INLINE bool FindBelow(std::uint32_t limit, TimerHandle handle,
                                          std::uint32_t& id) const noexcept {
    const std::uint64_t bits = BitsOf(handle);
    id = static_cast<std::uint32_t>(bits);
    if (id >= limit) return false;
    return m_hot[id].key == static_cast<std::uint32_t>(bits >> 32);
  }

  // The handle's index in the low 32 bits, its generation in the high ones. It arrives in one
  // 64-bit register; GCC spills it to memory to read the members apart, so on little-endian
  // targets they are read from its bits.
  static std::uint64_t BitsOf(TimerHandle handle) noexcept {
#if defined(_WIN32) || (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
    static_assert(sizeof(TimerHandle) == sizeof(std::uint64_t));
    std::uint64_t bits;
    std::memcpy(&bits, &handle, sizeof bits);
    return bits;
#else
    return std::uint64_t{handle.Generation()} << 32 | handle.Index();
#endif
  }

  TimerHandle HandleOf(std::uint32_t id) const noexcept {
    return TimerHandleAccess::Make(id, m_cold[id].generation);
  }

  Hot& HotOf(std::uint32_t id) noexcept { return m_hot[id]; }
  const Hot& HotOf(std::uint32_t id) const noexcept { return m_hot[id]; }
  Node& NodeOf(std::uint32_t id) noexcept { return m_hot[id].node; }
  const Node& NodeOf(std::uint32_t id) const noexcept { return m_hot[id].node; }
  // Allocated: the number of the last dispatch-batch entry that named the record (0: none).
  std::uint64_t& LastBatchEntry(std::uint32_t id) noexcept {
    if constexpr (kRecordsHoldDeadlines) {
      return m_lastBatchEntries[id];
    } else {
      return m_cold[id].lastBatchEntry;
    }
  }
  std::uint64_t LastBatchEntry(std::uint32_t id) const noexcept {
    if constexpr (kRecordsHoldDeadlines) {
      return m_lastBatchEntries[id];
    } else {
      return m_cold[id].lastBatchEntry;
    }
  }
  Cold& operator[](std::uint32_t id) noexcept { return m_cold[id]; }
  const Cold& operator[](std::uint32_t id) const noexcept { return m_cold[id]; }

  // The records through pointers held in locals, for a loop that stores through other pointers:
  // the compiler cannot tell such stores from the vectors' own members, so through the pool it
  // would load each vector's data pointer again after every one. Valid until the next Allocate.
  class Records {
   public:
    Node& NodeOf(std::uint32_t id) const noexcept { return m_hot[id].node; }
    Cold& operator[](std::uint32_t id) const noexcept { return m_cold[id]; }
    std::uint64_t& LastBatchEntry(std::uint32_t id) const noexcept {
      if constexpr (kRecordsHoldDeadlines) {
        return m_lastBatchEntries[id];
      } else {
        return m_cold[id].lastBatchEntry;
      }
    }

   private:
    friend class TimerPool;
    Records(Hot* hot, Cold* cold, std::uint64_t* lastBatchEntries) noexcept
        : m_hot(hot), m_cold(cold), m_lastBatchEntries(lastBatchEntries) {}
    Hot* m_hot;
    Cold* m_cold;
    std::uint64_t* m_lastBatchEntries;
  };
  Records Arrays() noexcept { return {m_hot.data(), m_cold.data(), m_lastBatchEntries.data()}; }

  template <class Function>
  void ForEachAllocated(Function&& function) const {
    for (std::uint32_t id = 0; id < m_size; ++id) {
      if (m_cold[id].flags & kAllocated) function(id, m_cold[id]);
    }
  }

 private:
  // Out of line, so that validation on the hot path stays a few compares.
  [[noreturn]] static void ThrowInvalid(TimerHandle handle) { throw InvalidTimerHandle(handle); }

  std::vector<Hot> m_hot;
  std::vector<Cold> m_cold;
  // Where the cold records hold the deadline: each record's last batch entry (ColdRecord's field;
  // empty otherwise).
  std::vector<std::uint64_t> m_lastBatchEntries;
  std::uint32_t m_size = 0;  // records in the vectors, kept so that validation does no arithmetic
  std::uint32_t m_freeHead = kNoIndex;
};

}  // namespace timerwheel::detail
