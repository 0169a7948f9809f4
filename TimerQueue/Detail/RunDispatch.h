// One dispatch of everything due, by a driver that holds `lock` on entry and on return.
#pragma once

#include <exception>

#include "TimerQueue/DispatchPolicy.h"
#include "TimerQueue/IManageTimerQueue.h"

namespace timerwheel::detail {

// WithLockHeld: one HandleTimeouts under the lock. WithoutLock: Begin under the lock, callbacks
// one at a time without it (checking `shouldStop` between two, so a shutdown is prompt), End
// under the lock. A throwing callback is reported and the rest still run (under WithLockHeld,
// they stay due and run at the driver's next dispatch).
template <class Lock, class ShouldStop>
void RunDispatch(IManageTimerQueue& queue, Lock& lock, DispatchPolicy policy,
                 const CallbackErrorHandler& onError, ShouldStop&& shouldStop) {
  if (policy == DispatchPolicy::WithLockHeld) {
    try {
      queue.HandleTimeouts();
    } catch (...) {
      ReportCallbackError(onError, std::current_exception());
    }
    return;
  }
  if (!queue.BeginTimeoutHandling()) return;
  lock.unlock();
  while (!shouldStop()) {
    try {
      if (queue.HandleTimeout(1) == 0) break;
    } catch (...) {
      ReportCallbackError(onError, std::current_exception());
    }
  }
  lock.lock();
  queue.EndTimeoutHandling();
}

}  // namespace timerwheel::detail
