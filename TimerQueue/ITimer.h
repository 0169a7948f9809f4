// The callback interface a timer queue calls when a timer expires.
#pragma once

#include "TimerQueue/TimerTypes.h"

namespace timerwheel {

// Implemented by users. The queue stores a pointer to it while the timer is set or its expiry is
// being dispatched and never owns or deletes it: the ITimer must outlive every arming that names
// it (cancel or destroy the timer first, then let the ITimer go).
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
