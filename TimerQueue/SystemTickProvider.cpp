// The operating system's clocks: the 64-bit tick providers and the wrapping 32-bit source.
#include "TimerQueue/SystemTickProvider.h"

#include <chrono>

#include "TimerQueue/WrappingTickAdapter.h"

#ifdef _WIN32
#include <windows.h>  // WIN32_LEAN_AND_MEAN and NOMINMAX come from the build
#endif

namespace timerwheel {

namespace {

Ticks SteadyMilliseconds() noexcept {
  using namespace std::chrono;
  return static_cast<Ticks>(
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
}

}  // namespace

Ticks SystemTickProvider::GetTickCount() const { return SteadyMilliseconds(); }

bool SystemTickProvider::ReadingsAreFloored() const noexcept { return true; }

const SystemTickProvider& SystemTickProvider::Instance() noexcept {
  static const SystemTickProvider instance;
  return instance;
}

Ticks TickCount64Provider::GetTickCount() const {
#ifdef _WIN32
  return ::GetTickCount64();
#else
  return SteadyMilliseconds();
#endif
}

const TickCount64Provider& TickCount64Provider::Instance() noexcept {
  static const TickCount64Provider instance;
  return instance;
}

std::uint32_t SystemWrappingTickSource::GetTickCount32() const {
#ifdef _WIN32
  // The whole point of this source is to model the wrapping API, so the deprecation advice to use
  // GetTickCount64 does not apply.
#ifdef _MSC_VER
#pragma warning(suppress : 28159)
#endif
  return ::GetTickCount();
#else
  return static_cast<std::uint32_t>(SteadyMilliseconds());
#endif
}

}  // namespace timerwheel
