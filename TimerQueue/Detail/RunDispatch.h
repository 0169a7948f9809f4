// One dispatch of everything due, by a driver that holds `lock` on entry and on return.
#pragma once

#include <exception>

#include "TimerQueue/CallbackErrorHandler.h"
#include "TimerQueue/DispatchPolicy.h"
#include "TimerQueue/IManageTimerQueue.h"

namespace timerwheel::detail {

// WithLockHeld: one HandleTimeouts under the lock. WithoutLock: Begin under the lock, callbacks
// one at a time without it (checking `shouldStop` between two, so a shutdown is prompt), End
// under the lock. A throwing callback is reported, always without the lock, and the rest still
// run (under WithLockHeld, they stay due and run at the driver's next dispatch). A Begin that
// throws (no memory for the batch) has detached nothing: it is reported and nothing runs.
template <class Lock, class ShouldStop>
void RunDispatch(IManageTimerQueue& queue, Lock& lock, DispatchPolicy policy,
                 const CallbackErrorHandler& onError, ShouldStop&& shouldStop) {
  if (policy == DispatchPolicy::WithLockHeld) {
    std::exception_ptr error;
    try {
      queue.HandleTimeouts();
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      lock.unlock();
      ReportCallbackError(onError, error);
      lock.lock();
    }
    return;
  }
  bool began = false;
  try {
    began = queue.BeginTimeoutHandling();
  } catch (...) {
    lock.unlock();
    ReportCallbackError(onError, std::current_exception());
    lock.lock();
    return;
  }
  if (!began) return;
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
