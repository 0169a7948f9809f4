// The longest a driver sleeps before it looks at the clock again.
#pragma once

#include "TimerQueue/TimerTypes.h"

namespace timerwheel::detail {

// Even when the next expiry is further away: a WrappingTickAdapter must be read at least once
// every 2^32 ms (49.7 days), and a sleep that long, woken a little late, would lose a whole wrap.
inline constexpr Milliseconds kMaximumSleep = 60 * 60 * 1000;  // one hour

}  // namespace timerwheel::detail
