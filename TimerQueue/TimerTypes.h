// Basic vocabulary shared by every timer queue: timeouts, instants and user data.
#pragma once

#include <cstdint>

namespace timerwheel {

// A timeout in milliseconds. kInfinite is never a valid timeout: GetNextTimeout() returns it to
// say "nothing is set", so the largest timeout any queue can accept is kInfinite - 1.
using Milliseconds = std::uint32_t;
inline constexpr Milliseconds kInfinite = 0xFFFFFFFFu;

// An instant: milliseconds from a monotonic source (see ITickProvider). 64 bits, so it does not
// wrap in the lifetime of a process.
using Ticks = std::uint64_t;

// Opaque per-arming value handed back to ITimer::OnTimer; wide enough for a pointer.
using UserData = std::uintptr_t;

}  // namespace timerwheel
