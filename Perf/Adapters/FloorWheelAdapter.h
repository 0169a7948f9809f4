// The floor: a minimal intrusive timer wheel written for the benchmark, as the cost of the
// contract's absence. The targets for TimerWheel are ratios to it (Perf/RESULTS.md).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "BenchmarkClock.h"
#include "TimerQueue/Core/TimerPool.h"  // TIMERWHEEL_ALWAYS_INLINE
#include "TimerQueue/ITimer.h"

namespace timerwheel::perf {

// What the fastest public wheels (Ratas, timeout.c) do, and nothing more: the event is embedded
// in the caller's object and linked by raw pointers (no handles, no validation of any kind), the
// caller passes the time (no clock read), slots are unordered lists (head insertion, no FIFO),
// there is no dual data, no monitor and no range check. The event carries only what firing needs:
// the callback and its argument, as TimerWheel's record does (32 bytes).
//
// One level of 4096 slots of 15 ms, deadlines rounded up to a slot boundary like TimerWheel's, so
// both fire the same timers at the same instants (the benchmark compares their checksums). The
// constant granularity lets the compiler turn the division into a multiply. Timeouts must be at
// most 61,425 ms (one revolution less a slot); nothing checks that.
class FloorWheel {
 public:
  static constexpr Ticks kGranularity = 15;
  static constexpr std::size_t kSlots = 4096;

  struct Event {
    Event* next = nullptr;
    Event** pprev = nullptr;  // the pointer that points here; null while not scheduled
    ITimer* timer = nullptr;
    UserData userData = 0;
  };

  explicit FloorWheel(Ticks now) : m_cursor(now / kGranularity) {}

  void Schedule(Event& event, Ticks now, Milliseconds timeout) {
    if (event.pprev != nullptr) Cancel(event);
    const Ticks slot = (now + timeout + kGranularity - 1) / kGranularity;
    Link(event, slot <= m_cursor ? m_due : m_slots[slot % kSlots]);
  }

  void Cancel(Event& event) {
    if (event.pprev == nullptr) return;
    *event.pprev = event.next;
    if (event.next != nullptr) event.next->pprev = event.pprev;
    event.pprev = nullptr;
  }

  // Fires every event due at `now`, slot by slot; returns how many.
  std::size_t Advance(Ticks now) {
    std::size_t fired = FireList(m_due);
    for (const Ticks target = now / kGranularity; m_cursor < target;) {
      ++m_cursor;
      fired += FireList(m_slots[m_cursor % kSlots]);
    }
    return fired;
  }

 private:
  static void Link(Event& event, Event*& head) {
    event.next = head;
    if (head != nullptr) head->pprev = &event.next;
    head = &event;
    event.pprev = &head;
  }

  std::size_t FireList(Event*& head) {
    std::size_t fired = 0;
    while (Event* event = head) {
      Cancel(*event);
      event->timer->OnTimer(event->userData);
      ++fired;
    }
    return fired;
  }

  std::array<Event*, kSlots> m_slots{};
  Event* m_due = nullptr;  // armed for a slot that has passed already: fires at the next Advance
  Ticks m_cursor;          // the last slot fired
};

// The benchmark's adapter over it: timer i is the i-th event of a vector reserved up front.
class FloorAdapter final : public ITimer {
 public:
  static constexpr bool kVirtualTime = true;

  FloorAdapter(std::size_t capacity, FiringLog& log)
      : m_wheel(std::make_unique<FloorWheel>(BenchmarkClock::Now())), m_log(log) {
    m_events.reserve(capacity);
  }

  std::size_t Create() {
    // Events are linked by address: the vector must never reallocate.
    if (m_events.size() == m_events.capacity()) throw std::logic_error("FloorAdapter: full");
    m_events.emplace_back();
    m_events.back().timer = this;
    m_events.back().userData = m_events.size() - 1;
    return m_events.size() - 1;
  }
  TIMERWHEEL_ALWAYS_INLINE void Arm(std::size_t timer, Milliseconds timeout) {
    m_wheel->Schedule(m_events[timer], BenchmarkClock::Now(), timeout);
  }
  TIMERWHEEL_ALWAYS_INLINE void Cancel(std::size_t timer) { m_wheel->Cancel(m_events[timer]); }
  std::size_t RunDue() { return m_wheel->Advance(BenchmarkClock::Now()); }

  void OnTimer(UserData timer) override { m_log.Record(timer); }

 private:
  std::unique_ptr<FloorWheel> m_wheel;
  FiringLog& m_log;
  std::vector<FloorWheel::Event> m_events;
};

}  // namespace timerwheel::perf
