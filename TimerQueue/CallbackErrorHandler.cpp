#include "TimerQueue/CallbackErrorHandler.h"

#include <cstdio>
#include <exception>

namespace timerwheel {

void ReportCallbackErrorToStderr(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "TimerWheel: a timer callback threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(
        stderr,
        "TimerWheel: a timer callback threw an exception not derived from std::exception\n");
  }
}

void ReportCallbackError(const CallbackErrorHandler& handler,
                         const std::exception_ptr& error) noexcept {
  if (handler) {
    try {
      handler(error);
      return;
    } catch (...) {
      // The handler itself failed: fall back to stderr rather than lose the report.
    }
  }
  ReportCallbackErrorToStderr(error);
}

}  // namespace timerwheel
