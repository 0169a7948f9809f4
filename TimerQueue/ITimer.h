// The callback interface a timer queue calls when a timer expires.
#pragma once

#include "TimerQueue/TimerTypes.h"

namespace timerwheel {

// Implemented by users. The queue stores a pointer to it while the timer is set or its expiry is
// being dispatched and never owns or deletes it: the ITimer must outlive every arming that names
// it, including one whose expiry has already been detached for dispatch. Cancelling or destroying
// the timer stops a pending arming, but not a callback that is already detached (CancelTimer then
// returns false) and may be running on the dispatch thread; nor does a cancel that returns true
// stop an earlier expiry of the same timer that is still in the batch. So an ITimer may be let go:
//  - from inside its own last callback (nothing else refers to it), or
//  - once the driver's dispatch has stopped (WaitForShutdownToComplete returned true), or, with a
//    single-threaded queue, when no dispatch is in progress.
// Otherwise keep it alive by other means, e.g. a reference count in the object the user data
// names, released by the callback.
class ITimer {
 public:
  // Called once per expiry with the user data given to SetTimer/UpdateTimer. May call any method
  // of the queue that fired it (through the driver, if there is one), including re-setting,
  // cancelling or destroying this very timer.
  virtual void OnTimer(UserData userData) = 0;

 protected:
  ~ITimer() = default;
};

}  // namespace timerwheel
