// How a driver runs timer callbacks relative to its lock, and what it does when one throws.
#pragma once

#include <exception>
#include <functional>

#include "TimerQueue/TimerTypes.h"

namespace timerwheel {

enum class DispatchPolicy {
  // Begin / Handle / End: callbacks run without the driver's lock, so other threads can set and
  // cancel timers (including the ones firing) while callbacks run. The default.
  WithoutLock,
  // One HandleTimeouts() under the lock: simpler to reason about, but every other thread's set or
  // cancel waits for the whole batch of callbacks.
  WithLockHeld,
};

// Called (on the dispatching thread, without the driver's lock) with the exception a timer
// callback threw; dispatch then carries on with the next expiry. The default prints the message
// to stderr. Drivers also report here a failure of the dispatch machinery itself (e.g. no memory
// for the batch), after which the expiries stay due.
using CallbackErrorHandler = std::function<void(std::exception_ptr)>;

// The longest a driver sleeps before it looks at the clock again, even when the next expiry is
// further away: a WrappingTickAdapter must be read at least once every 2^32 ms (49.7 days), and a
// sleep that long, woken a little late, would lose a whole wrap.
inline constexpr Milliseconds kMaximumSleep = 60 * 60 * 1000;  // one hour

// The default handler: "TimerWheel: a timer callback threw: <what()>" on stderr.
void ReportCallbackErrorToStderr(const std::exception_ptr& error) noexcept;

// What drivers call: `handler` if set (falling back to stderr if it throws), else stderr.
void ReportCallbackError(const CallbackErrorHandler& handler,
                         const std::exception_ptr& error) noexcept;

namespace detail {
// What every driver does when it is destroyed from one of its own callbacks (see ITimer.h): says
// so on stderr, then std::terminate (its thread would go on using freed members).
[[noreturn]] void TerminateDestroyedFromOwnCallback() noexcept;
}  // namespace detail

}  // namespace timerwheel
