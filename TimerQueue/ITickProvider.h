// Where timer queues read the time: a 64-bit monotonic millisecond count.
#pragma once

#include "TimerQueue/TimerTypes.h"

namespace timerwheel {

// Queues read time only through the provider they were given, so tests can inject a manual clock.
// GetTickCount must be monotonic (never go backwards) and safe to call from any thread.
class ITickProvider {
 public:
  virtual Ticks GetTickCount() const = 0;
  virtual ~ITickProvider() = default;
};

}  // namespace timerwheel
