// One dispatch of everything due, by a driver that holds `lock` on entry and on return.
#pragma once

#include <exception>

#include "TimerQueue/CallbackErrorHandler.h"
#include "TimerQueue/DispatchPolicy.h"
#include "TimerQueue/IManageTimerQueue.h"

namespace timerwheel::detail {

// Begin under the lock, callbacks one at a time, checking `shouldStop` between two (so a shutdown
// is prompt: at most the callback in hand finishes, whichever the policy), End under the lock.
// WithoutLock runs the callbacks without the lock; WithLockHeld holds it throughout (its
// shutdown flag is read without the lock, so that BeginShutdown from another thread is seen).
// A throwing callback is reported, always without the lock; under WithoutLock the rest still
// run, under WithLockHeld the dispatch ends there and the rest stay due for the driver's next
// (as HandleTimeouts would leave them). A Begin that throws (no memory for the batch) has
// detached nothing: it is reported and nothing runs.
template <class Lock, class ShouldStop>
void RunDispatch(IManageTimerQueue& queue, Lock& lock, DispatchPolicy policy,
                 const CallbackErrorHandler& onError, ShouldStop&& shouldStop) {
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
  if (policy == DispatchPolicy::WithLockHeld) {
    std::exception_ptr error;
    while (!shouldStop()) {
      try {
        if (queue.HandleTimeout(1) == 0) break;
      } catch (...) {
        error = std::current_exception();
        break;
      }
    }
    queue.EndTimeoutHandling();
    if (error) {
      lock.unlock();
      ReportCallbackError(onError, error);
      lock.lock();
    }
    return;
  }
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
