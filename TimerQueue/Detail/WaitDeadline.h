// The instant a wait of any std::chrono::milliseconds ends, or none.
#pragma once

#include <chrono>
#include <optional>

namespace timerwheel::detail {

// WaitForShutdownToComplete takes any duration. milliseconds::max(), the natural "as long as it
// takes", overflowed steady_clock::now() + timeout (undefined behaviour: in practice a deadline in
// the past, so the wait returned false at once). A timeout beyond what the clock can count from
// now is no deadline at all (the caller waits without one); a negative timeout is now.
inline std::optional<std::chrono::steady_clock::time_point> WaitDeadline(
    std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (timeout <= std::chrono::milliseconds::zero()) return now;
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
  if (timeout >= room) return std::nullopt;
  return now + timeout;
}

}  // namespace timerwheel::detail
