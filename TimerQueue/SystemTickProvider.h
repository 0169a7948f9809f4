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
// Never early: the reading lags the true instant by less than one step plus the interrupt's
// latency, and the kernel keeps it current whether or not any of our threads runs (unlike a value
// refreshed by a driver thread, which a descheduled thread leaves stale for any length of time).
// ReadingLagBound is therefore the step rounded up to whole ms, plus 1 for the floor to ms, plus
// 1 for the latency of the interrupt that stores it: 6 ms for a 4 ms step (HZ 250), 18 ms on
// Windows. Queues add it to every deadline, so timers fire that much later on average: choose this
// clock where a cheaper SetTimer matters more than the lateness (a wheel of 15 ms slots is already
// that coarse). The bound does not cover a kernel whose timekeeping stalls for longer than a
// millisecond (a virtual machine whose timekeeping CPU is not scheduled by the hypervisor); there
// only SystemTickProvider is exact.
//
// Stateless apart from the bound, which is measured once (clock_getres) at first use. Thread-safe.
class CoarseTickProvider final : public ITickProvider {
 public:
  Ticks GetTickCount() const override;
  Ticks ReadingLagBound() const noexcept override;

  static const CoarseTickProvider& Instance() noexcept;

  // The lag bound of a clock that steps by `stepNanoseconds`: ceil(step / 1 ms) + 2.
  static Ticks LagBoundForStep(std::uint64_t stepNanoseconds) noexcept;

 private:
  CoarseTickProvider() noexcept;
  Ticks m_lagBound;
};

}  // namespace timerwheel
