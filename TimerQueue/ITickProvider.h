// Where timer queues read the time: a 64-bit monotonic millisecond count.
#pragma once

#include <atomic>

#include "TimerQueue/TimerTypes.h"

namespace timerwheel {

// Queues read time only through the provider they were given, so tests can inject a manual clock.
// GetTickCount must be monotonic (never go backwards) and safe to call from any thread, and its
// readings must stay below 2^63: a deadline is a reading plus up to 2^32 ms and the lag bound, in
// 64 bits, and wrapped it would be in the past (a count of ms from boot or from 1970 stays below
// 2^63 for 292 million years; a test's clock started near 2^64 would not).
class ITickProvider {
 public:
  virtual Ticks GetTickCount() const = 0;

  // How far a reading may be behind the true instant, in whole ticks: L such that a reading r
  // taken at true instant t always has t - L < r <= t. Queues add L to every deadline they compute,
  // so a timer set at t with timeout d is due at r + d + L > t + d: never early in real time,
  // at the cost of up to L ms more lateness. 0 for a clock whose readings are the instants
  // themselves (a manual clock); 1 for a finer clock floored to whole ms (SystemTickProvider:
  // 10.9 reads as 10); more for a coarse clock that advances in steps (CoarseTickProvider).
  // Read once, when a queue is constructed; must not change afterwards.
  virtual Ticks ReadingLagBound() const noexcept { return 0; }

  // For a provider whose reading is a counter kept in memory (a manual or virtual clock, a loop
  // time a driver stores): that counter, which GetTickCount would return, so that queues read it
  // with one relaxed load instead of a virtual call (their set path then makes no call at all).
  // Null (the default) for a provider that computes its reading: queues call GetTickCount. Read
  // once, when a queue is constructed; the counter must outlive the queue and obey GetTickCount's
  // rules (monotonic, readable from any thread).
  virtual const std::atomic<Ticks>* ReadingCounter() const noexcept { return nullptr; }

  virtual ~ITickProvider() = default;
};

}  // namespace timerwheel
