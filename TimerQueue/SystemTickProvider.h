// The operating system's clocks: the exact one (the default) and the coarse one for hot paths.
#pragma once

#include <cstdint>

#include "TimerQueue/ITickProvider.h"

namespace timerwheel {

// std::chrono::steady_clock (QueryPerformanceCounter on Windows, CLOCK_MONOTONIC on Linux)
// floored to whole milliseconds; queues add one tick to each deadline (ReadingLagBound 1), so no
// timer fires before set time + timeout. Stateless and thread-safe. A read costs 20-50 ns (the
// vDSO or QPC reads the cycle counter and scales it), paid by every SetTimer.
class SystemTickProvider final : public ITickProvider {
 public:
  Ticks GetTickCount() const override;
  Ticks ReadingLagBound() const noexcept override;  // 1

  // A process-wide instance, used by queues constructed without a provider.
  static const SystemTickProvider& Instance() noexcept;
};

// The kernel's coarse monotonic clock: a copy of the time that the kernel stores at each timer
// interrupt, so a read is a few loads and no cycle-counter read. Linux: CLOCK_MONOTONIC_COARSE
// (through the vDSO; it steps by clock_getres(CLOCK_MONOTONIC_COARSE), 1-10 ms by the kernel's
// HZ). Windows: GetTickCount64 (the interrupt-time tick count in the shared user page; it steps
// by the clock interrupt period, 15.625 ms). Elsewhere: steady_clock, as SystemTickProvider.
//
// Never early: the reading lags the true instant by a bounded number of steps plus the
// interrupt's latency, and the kernel keeps it current whether or not any of our threads runs
// (unlike a value refreshed by a driver thread, which a descheduled thread leaves stale for any
// length of time). On Linux the lag is up to two steps: the stored time advances only by whole
// tick intervals (timekeeping accumulates the clocksource in interval-sized chunks), so at the
// tick that stores it, it can already be almost an interval old, and it is read up to one more
// interval later; measured on this project's VM (HZ 250): 3.3-7.1 ms behind CLOCK_MONOTONIC when
// idle. Windows' GetTickCount64 counts clock interrupts: one step. ReadingLagBound is therefore
// the steps rounded up to whole ms, plus 1 for the floor to ms, plus 1 for the latency of the
// interrupt that stores it: 10 ms for a 4 ms step (HZ 250), 18 ms on Windows. Queues add it to
// every deadline, so timers fire that much later on average: choose this clock where a cheaper
// SetTimer matters more than the lateness (a wheel of 15 ms slots is already that coarse). The
// bound does not cover a kernel whose timekeeping stalls for longer than a millisecond (a virtual
// machine whose timekeeping CPU the hypervisor does not run: seen here under load, up to 11 ms
// behind); there only SystemTickProvider is exact.
//
// Stateless apart from the bound, which is measured once (clock_getres) at first use. Thread-safe.
class CoarseTickProvider final : public ITickProvider {
 public:
  Ticks GetTickCount() const override;
  Ticks ReadingLagBound() const noexcept override;

  static const CoarseTickProvider& Instance() noexcept;

  // The lag bound of a clock that steps by `stepNanoseconds` and may be `steps` steps behind:
  // ceil(steps x step / 1 ms) + 2.
  static Ticks LagBoundForSteps(std::uint64_t stepNanoseconds, unsigned steps) noexcept;

 private:
  CoarseTickProvider() noexcept;
  Ticks m_lagBound;
};

}  // namespace timerwheel
