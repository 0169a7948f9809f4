// The exception every queue throws for a null, destroyed or stale TimerHandle.
#pragma once

#include <stdexcept>
#include <string>

#include "TimerQueue/TimerHandle.h"

namespace timerwheel {

// Thrown in every build, release included, before anything is changed. (A handle of another
// queue is caught only when it names no live timer of this one: TimerHandle.h.)
class InvalidTimerHandle : public std::invalid_argument {
 public:
  explicit InvalidTimerHandle(TimerHandle handle)
      : std::invalid_argument("invalid timer handle (index " + std::to_string(handle.Index()) +
                              ", generation " + std::to_string(handle.Generation()) +
                              "): null, destroyed or stale"),
        m_handle(handle) {}

  TimerHandle Handle() const noexcept { return m_handle; }

 private:
  TimerHandle m_handle;
};

}  // namespace timerwheel
