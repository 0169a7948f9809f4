// The default tick provider, the operating system's monotonic clock, and the coarse Windows tick
// count for those who want it.
#pragma once

#include "TimerQueue/ITickProvider.h"

namespace timerwheel {

// std::chrono::steady_clock (QueryPerformanceCounter on Windows, CLOCK_MONOTONIC on Linux)
// floored to whole milliseconds; queues add one tick to each deadline (ReadingsAreFloored), so no
// timer fires before set time + timeout. Stateless and thread-safe.
class SystemTickProvider final : public ITickProvider {
 public:
  Ticks GetTickCount() const override;
  bool ReadingsAreFloored() const noexcept override;  // true

  // A process-wide instance, used by queues constructed without a provider.
  static const SystemTickProvider& Instance() noexcept;
};

// GetTickCount64() on Windows (steady_clock elsewhere): the interrupt-time tick count, cheap to
// read but coarse. It advances in steps of the timer interrupt period (15.625 ms unless some
// process raised the resolution), so a reading lags the true time by up to one step, and a timer
// may fire up to one step (15.6 ms) before set time + timeout. For JetByte-style servers that
// accept 15 ms timer granularity and want the cheapest clock read; everyone else should use
// SystemTickProvider, which never fires early. Stateless and thread-safe.
class TickCount64Provider final : public ITickProvider {
 public:
  Ticks GetTickCount() const override;

  static const TickCount64Provider& Instance() noexcept;
};

}  // namespace timerwheel
