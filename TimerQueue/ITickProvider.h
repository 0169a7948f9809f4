// Where timer queues read the time: a 64-bit monotonic millisecond count.
#pragma once

#include "TimerQueue/TimerTypes.h"

namespace timerwheel {

// Queues read time only through the provider they were given, so tests can inject a manual clock.
// GetTickCount must be monotonic (never go backwards) and safe to call from any thread.
class ITickProvider {
 public:
  virtual Ticks GetTickCount() const = 0;

  // True if a reading is a finer clock rounded down to whole milliseconds, so that it may be up
  // to 1 ms behind the true instant. Queues then add one tick to every deadline: a timer set at
  // true time 10.9 (read as 10) with a 20 ms timeout is due at 31, never at 30.0 (19.1 ms after
  // the set). False for a clock whose readings are the instants themselves (a manual clock).
  virtual bool ReadingsAreFloored() const noexcept { return false; }

  virtual ~ITickProvider() = default;
};

}  // namespace timerwheel
