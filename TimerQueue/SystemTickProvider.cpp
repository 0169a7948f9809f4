// The operating system's clocks: the 64-bit tick provider and the wrapping 32-bit source.
#include "TimerQueue/SystemTickProvider.h"

#include "TimerQueue/WrappingTickAdapter.h"

#ifdef _WIN32
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <chrono>
#endif

namespace timerwheel {

Ticks SystemTickProvider::GetTickCount() const {
#ifdef _WIN32
  return ::GetTickCount64();
#else
  using namespace std::chrono;
  return static_cast<Ticks>(
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
#endif
}

const SystemTickProvider& SystemTickProvider::Instance() noexcept {
  static const SystemTickProvider instance;
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
  using namespace std::chrono;
  return static_cast<std::uint32_t>(
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
#endif
}

}  // namespace timerwheel
