// ThreadedTimerQueue: runs any IManageTimerQueue on a dispatch thread of its own.
#pragma once

#include <memory>

#include "TimerQueue/Detail/DispatchThread.h"
#include "TimerQueue/DriverOptions.h"

namespace timerwheel {

using ThreadedTimerQueueOptions = LockingDriverOptions;

// Makes a timer queue usable from any thread: every ITimerQueue call takes one lock, and a thread
// of its own sleeps until the next expiry and runs the callbacks.
//
// Ground rules (locking): see detail::DispatchThread. Under DispatchPolicy::WithoutLock the
// callbacks run without the lock (Begin and End hold it); under WithLockHeld the whole dispatch
// holds it. Either way callbacks may call any method of this object, on any timer, including
// BeginShutdown; they must not call WaitForShutdownToComplete or destroy this object.
//
// Wake-ups: only a set or update that brings the next expiry forward wakes the thread; each
// return from sleep is reported to the monitor's OnDispatchWakeUp.
// Errors: a callback that throws is reported to onCallbackError and dispatch carries on.
// Shutdown: BeginShutdown is prompt (at most the callback running at that moment finishes).
// Timers still pending are NOT fired: they stay in the underlying queue and are freed with it.
// After WaitForShutdownToComplete returns true no callback runs. The destructor does both.
class ThreadedTimerQueue final : public detail::DispatchThread {
 public:
  // Runs `queue`, which the caller owns and keeps alive until this object is destroyed.
  explicit ThreadedTimerQueue(IManageTimerQueue& queue, ThreadedTimerQueueOptions options = {});
  // Runs and owns `queue` (std::invalid_argument if it is null).
  explicit ThreadedTimerQueue(std::unique_ptr<IManageTimerQueue> queue,
                              ThreadedTimerQueueOptions options = {});
  ~ThreadedTimerQueue() override;

 private:
  void Dispatch(Lock& lock) override;

  std::unique_ptr<IManageTimerQueue> m_owned;
  const ThreadedTimerQueueOptions m_options;
};

}  // namespace timerwheel
