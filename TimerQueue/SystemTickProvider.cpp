// The operating system's clocks: the 64-bit tick providers and the wrapping 32-bit source.
#include "TimerQueue/SystemTickProvider.h"

#include <chrono>

#include "TimerQueue/WrappingTickAdapter.h"

#ifdef _WIN32
#include <windows.h>  // WIN32_LEAN_AND_MEAN and NOMINMAX come from the build
#elif defined(__linux__)
#include <ctime>  // clock_gettime, clock_getres (POSIX, declared by glibc's <ctime> too)
#endif

namespace timerwheel {

namespace {

Ticks SteadyMilliseconds() noexcept {
  using namespace std::chrono;
  return static_cast<Ticks>(
      duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
}

constexpr std::uint64_t kNanosecondsPerMillisecond = 1'000'000;

#ifdef _WIN32
// GetTickCount64 advances once per clock interrupt at the system's largest period, 15.625 ms,
// whatever timeBeginPeriod asks for.
constexpr std::uint64_t kTickCountStepNanoseconds = 15'625'000;
#endif

// How many steps the coarse reading may be behind (see CoarseTickProvider in the header): Linux
// stores whole tick intervals at each tick, Windows counts the interrupts themselves. (Both were
// 2 from 1942eaa on, whose message and docs said one step on Windows: 34 ms, not the 18 the docs
// give.)
#ifdef _WIN32
constexpr unsigned kCoarseStepsBehind = 1;
#else
constexpr unsigned kCoarseStepsBehind = 2;
#endif

// The step of the coarse clock this platform reads; 0 where it reads steady_clock.
std::uint64_t CoarseStepNanoseconds() noexcept {
#ifdef _WIN32
  return kTickCountStepNanoseconds;
#elif defined(__linux__)
  timespec resolution{};
  if (::clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) != 0) {
    return 1'000 * kNanosecondsPerMillisecond;  // cannot happen since Linux 2.6.32: be safe
  }
  return static_cast<std::uint64_t>(resolution.tv_sec) * 1'000 * kNanosecondsPerMillisecond +
         static_cast<std::uint64_t>(resolution.tv_nsec);
#else
  return 0;
#endif
}

}  // namespace

Ticks SystemTickProvider::GetTickCount() const { return SteadyMilliseconds(); }

Ticks SystemTickProvider::ReadingLagBound() const noexcept { return 1; }

const SystemTickProvider& SystemTickProvider::Instance() noexcept {
  static const SystemTickProvider instance;
  return instance;
}

CoarseTickProvider::CoarseTickProvider() noexcept {
  const std::uint64_t step = CoarseStepNanoseconds();
  m_lagBound = step == 0 ? 1 : LagBoundForSteps(step, kCoarseStepsBehind);
}

Ticks CoarseTickProvider::LagBoundForSteps(std::uint64_t stepNanoseconds, unsigned steps) noexcept {
  const std::uint64_t lag = stepNanoseconds * steps;
  return (lag + kNanosecondsPerMillisecond - 1) / kNanosecondsPerMillisecond + 2;
}

Ticks CoarseTickProvider::GetTickCount() const {
#ifdef _WIN32
  return ::GetTickCount64();
#elif defined(__linux__)
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);  // cannot fail for a valid clock id
  return static_cast<Ticks>(now.tv_sec) * 1'000 +
         static_cast<Ticks>(now.tv_nsec) / kNanosecondsPerMillisecond;
#else
  return SteadyMilliseconds();
#endif
}

Ticks CoarseTickProvider::ReadingLagBound() const noexcept { return m_lagBound; }

const CoarseTickProvider& CoarseTickProvider::Instance() noexcept {
  static const CoarseTickProvider instance;
  return instance;
}

Ticks SystemWrappingTickSource::ReadingLagBound() const noexcept {
#ifdef _WIN32
  return CoarseTickProvider::Instance().ReadingLagBound();  // the same interrupt-driven count
#else
  return 1;  // the steady clock floored to ms, as SystemTickProvider's
#endif
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
