// The pool of timer records behind every queue: a slot map of records indexed by TimerHandle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "TimerQueue/ITimer.h"
#include "TimerQueue/InvalidTimerHandle.h"
#include "TimerQueue/TimerHandle.h"
#include "TimerQueue/TimerTypes.h"

namespace timerwheel::detail {

inline constexpr std::uint32_t kNoIndex = 0xFFFFFFFFu;
inline constexpr std::uint32_t kLastGeneration = 0xFFFFFFFFu;  // generations run 1..this; 0 = null

// What a timer calls when it fires: the "active" data of a pending timer, and the "timed-out"
// copy that travels in the dispatch batch.
struct TimerData {
  ITimer* timer = nullptr;
  UserData userData = 0;
};

// Record state bits.
enum RecordFlag : std::uint8_t {
  kAllocated = 1,       // in use (not on the free list)
  kPending = 2,         // scheduled: `active` and `deadline` are valid
  kHandleReleased = 4,  // no user handle refers to it any more (destroyed, or a one-shot)
};

// One timer. `Node` is the scheduler's intrusive part (heap position, or wheel links), embedded
// so that the record and its links share a cache line.
template <class Node>
struct TimerRecord {
  TimerData active;
  Ticks deadline = 0;            // exact set time + timeout, while pending
  std::uint32_t generation = 1;  // must match the handle's; bumped on free, never wraps
  std::uint32_t batchRefs = 0;   // dispatch-batch entries that still refer to this record
  std::uint32_t nextFree = kNoIndex;
  std::uint8_t flags = 0;
  Node node{};

  bool IsPending() const noexcept { return (flags & kPending) != 0; }
};

// A slot map: records live in one vector and are reused LIFO from a free list, so steady-state
// create/destroy allocates nothing and reused records are cache-warm. Records are addressed by
// index (the vector may reallocate while it grows: never keep a reference across an Allocate).
// Validation of a handle is O(1): bounds, generation and state.
template <class Node>
class TimerPool {
 public:
  using Record = TimerRecord<Node>;

  void Reserve(std::size_t records) { m_records.reserve(records); }

  // Capacity the vector has room for without reallocating: schedulers size their own arrays to it.
  std::size_t Capacity() const noexcept { return m_records.capacity(); }
  std::size_t Size() const noexcept { return m_size; }

  std::uint32_t Allocate() {
    std::uint32_t id = m_freeHead;
    if (id != kNoIndex) {
      m_freeHead = m_records[id].nextFree;
    } else {
      if (m_size == kNoIndex) throw std::length_error("timer pool is full");
      m_records.emplace_back();
      id = m_size++;
    }
    Record& record = m_records[id];
    record.flags = kAllocated;
    record.nextFree = kNoIndex;
    return id;
  }

  void Free(std::uint32_t id) noexcept {
    Record& record = m_records[id];
    record.flags = 0;
    record.active = {};
    record.batchRefs = 0;
    // Bump the generation so every copy of the old handle is stale. A slot whose generation has
    // run out is retired (never reused) rather than wrapped: a handle kept from 2^32 reuses ago
    // must not come back to life. That costs one record per 2^32 frees of one slot.
    if (record.generation == kLastGeneration) return;
    ++record.generation;
    record.nextFree = m_freeHead;
    m_freeHead = id;
  }

  // The record a handle names, or InvalidTimerHandle if it is null, destroyed or stale.
  std::uint32_t IdOf(TimerHandle handle) const {
    const std::uint32_t id = handle.Index();
    if (id >= m_size) ThrowInvalid(handle);
    const Record& record = m_records[id];
    if (record.generation != handle.Generation() ||
        (record.flags & (kAllocated | kHandleReleased)) != kAllocated) {
      ThrowInvalid(handle);
    }
    return id;
  }

  TimerHandle HandleOf(std::uint32_t id) const noexcept {
    return TimerHandleAccess::Make(id, m_records[id].generation);
  }

  Record& operator[](std::uint32_t id) noexcept { return m_records[id]; }
  const Record& operator[](std::uint32_t id) const noexcept { return m_records[id]; }

  template <class Function>
  void ForEachAllocated(Function&& function) const {
    for (std::uint32_t id = 0; id < m_size; ++id) {
      if (m_records[id].flags & kAllocated) function(id, m_records[id]);
    }
  }

 private:
  // Out of line, so that validation on the hot path stays a few compares.
  [[noreturn]] static void ThrowInvalid(TimerHandle handle) { throw InvalidTimerHandle(handle); }

  std::vector<Record> m_records;
  std::uint32_t m_size = 0;  // m_records.size(), kept so that validation does no arithmetic
  std::uint32_t m_freeHead = kNoIndex;
};

}  // namespace timerwheel::detail
