// What every driver does when it is destroyed from one of its own callbacks (see ITimer.h).
#pragma once

namespace timerwheel::detail {

// Says so on stderr, then std::terminate: the driver's thread would go on using freed members.
[[noreturn]] void TerminateDestroyedFromOwnCallback() noexcept;

}  // namespace timerwheel::detail
