// What a driver does with the exception a timer callback threw: hands it to the user's handler.
#pragma once

#include <exception>
#include <functional>

namespace timerwheel {

// Called (on the dispatching thread, without the driver's lock) with the exception a timer
// callback threw; dispatch then carries on with the next expiry. The default prints the message
// to stderr. Drivers also report here a failure of the dispatch machinery itself (e.g. no memory
// for the batch), after which the expiries stay due.
using CallbackErrorHandler = std::function<void(std::exception_ptr)>;

// The default handler: "TimerWheel: a timer callback threw: <what()>" on stderr.
void ReportCallbackErrorToStderr(const std::exception_ptr& error) noexcept;

// What drivers call: `handler` if set (falling back to stderr if it throws), else stderr.
void ReportCallbackError(const CallbackErrorHandler& handler,
                         const std::exception_ptr& error) noexcept;

}  // namespace timerwheel
