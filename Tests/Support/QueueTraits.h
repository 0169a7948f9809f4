// One traits struct per timer queue implementation: the contract tests run against each of them.
// Traits describe behavioural differences (granularity, maximum timeout), never the type.
#pragma once

#include <memory>

#include "TimerQueue/ITimerQueueMonitor.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"

namespace timerwheel::test {

struct HeapTraits {
  using Queue = TimerQueue;
  static constexpr Milliseconds kGranularity = 1;
  static constexpr Milliseconds kMaximumTimeout = kInfinite - 1;

  static std::unique_ptr<Queue> Make(const ITickProvider& ticks, ITimerQueueMonitor* monitor) {
    TimerQueueOptions options;
    options.monitor = monitor;
    return std::make_unique<Queue>(options, ticks);
  }
};

template <Milliseconds kGranularityV, Milliseconds kMaximumTimeoutV>
struct WheelTraitsOf {
  using Queue = TimerWheel;
  static constexpr Milliseconds kGranularity = kGranularityV;
  static constexpr Milliseconds kMaximumTimeout = kMaximumTimeoutV;

  static std::unique_ptr<Queue> Make(const ITickProvider& ticks, ITimerQueueMonitor* monitor) {
    TimerWheelOptions options;
    options.maximumTimeout = kMaximumTimeout;
    options.granularity = kGranularity;
    options.monitor = monitor;
    return std::make_unique<Queue>(options, ticks);
  }
};

// The default wheel: 15 ms slots, one minute.
struct WheelTraits : WheelTraitsOf<15, 60'000> {};
// A 1 ms wheel: every slot is a millisecond, as exact as the heap up to its maximum.
struct FineWheelTraits : WheelTraitsOf<1, 5'000> {};
// A wheel at the edge of its ring: a timeout of M set just after a slot boundary lands
// ceil(105 / 7) + 1 = 16 slots ahead of the cursor, which a ring of 16 would put on the cursor's
// own ring index (the ring has 32: ceil(M / g) + 2 rounded up).
struct TightWheelTraits : WheelTraitsOf<7, 105> {};

// The time at which a timer with this exact deadline fires: the first multiple of the
// granularity at or after it.
template <class Traits>
constexpr Ticks FiringTime(Ticks deadline) {
  return (deadline + Traits::kGranularity - 1) / Traits::kGranularity * Traits::kGranularity;
}

}  // namespace timerwheel::test

// Every implementation the contract tests run against.
#define TIMERWHEEL_ALL_QUEUE_TRAITS \
  timerwheel::test::HeapTraits, timerwheel::test::WheelTraits, timerwheel::test::FineWheelTraits
