// How a driver runs timer callbacks relative to its lock, and what it does when one throws.
#pragma once

#include <exception>
#include <functional>

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
// to stderr.
using CallbackErrorHandler = std::function<void(std::exception_ptr)>;

// The default handler: "TimerWheel: a timer callback threw: <what()>" on stderr.
void ReportCallbackErrorToStderr(std::exception_ptr error) noexcept;

// What drivers call: `handler` if set (falling back to stderr if it throws), else stderr.
void ReportCallbackError(const CallbackErrorHandler& handler, std::exception_ptr error) noexcept;

}  // namespace timerwheel
