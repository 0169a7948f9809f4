#include "TimerQueue/Detail/DestroyedFromOwnCallback.h"

#include <cstdio>
#include <exception>

namespace timerwheel::detail {

void TerminateDestroyedFromOwnCallback() noexcept {
  std::fputs("TimerWheel: a timer driver was destroyed from its own callback (see ITimer.h)\n",
             stderr);
  std::terminate();
}

}  // namespace timerwheel::detail
