// Events a timer queue (and its driver) reports, for leak checks in tests and metrics in servers.
#pragma once

namespace timerwheel {

// Called synchronously on the thread doing the operation, under the driver's lock except for
// OnTimerFired (called from HandleTimeout, outside the lock): implementations must be thread-safe
// and cheap (counters). The queue never calls it for operations that throw.
//
// Live timers = created + one-shot created - deleted.
class ITimerQueueMonitor {
 public:
  virtual void OnTimerCreated() = 0;
  virtual void OnOneShotTimerCreated() = 0;
  virtual void OnTimerSet(bool wasPending) = 0;
  virtual void OnTimerUpdated(bool wasPending, bool wasUpdated) = 0;
  virtual void OnTimerCancelled(bool wasPending) = 0;
  virtual void OnTimerFired() = 0;                     // one callback is about to run
  virtual void OnTimerDestroyed(bool wasPending) = 0;  // the user released a handle
  virtual void OnTimerDeleted() = 0;                   // a record was freed (handles and one-shots)
  virtual void OnDispatchWakeUp() = 0;                 // a driver's dispatch thread woke up

 protected:
  ~ITimerQueueMonitor() = default;
};

}  // namespace timerwheel
