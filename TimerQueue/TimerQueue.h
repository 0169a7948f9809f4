// TimerQueue: the indexed-heap timer queue. Any timeout up to kInfinite - 1, exact deadlines.
#pragma once

#include <cstddef>

#include "TimerQueue/Core/BasicTimerQueue.h"
#include "TimerQueue/Core/HeapScheduler.h"
#include "TimerQueue/SystemTickProvider.h"

namespace timerwheel {

struct TimerQueueOptions {
  ITimerQueueMonitor* monitor = nullptr;  // not owned; must outlive the queue
  std::size_t initialCapacity = 0;        // timers to make room for up front
};

// A timer queue ordered by an indexed 4-ary heap.
//
// Choose it when timeouts are long or varied (up to 49.7 days) or deadlines must be exact to the
// millisecond; choose TimerWheel when almost every timer is re-armed or cancelled before it fires
// and a granularity of a few ms is fine.
//
// Thread safety: none; wrap it in a driver (ThreadedTimerQueue, AsioTimerQueue, IocpTimerQueue)
// or use it from one thread. Dispatch follows IManageTimerQueue's Begin/Handle/End contract.
// Invariants: a timer fires at set time + timeout exactly (never early); equal deadlines fire in
// set order. Complexity: Set/Update/Cancel/Destroy O(log n) with no search, GetNextTimeout O(1),
// CreateTimer O(1); nothing allocates in steady state.
class TimerQueue final : public detail::BasicTimerQueue<detail::HeapScheduler> {
 public:
  explicit TimerQueue(TimerQueueOptions options = {},
                      const ITickProvider& ticks = SystemTickProvider::Instance());
  explicit TimerQueue(const ITickProvider& ticks);
};

}  // namespace timerwheel
