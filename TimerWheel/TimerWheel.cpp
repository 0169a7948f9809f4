#include "TimerWheel/TimerWheel.h"

namespace timerwheel {

TimerWheel::TimerWheel(TimerWheelOptions options, const ITickProvider& ticks)
    : BasicTimerQueue(ticks, options.monitor, options.initialCapacity, options.maximumTimeout,
                      options.granularity, ticks.ReadingLagBound(), ticks.GetTickCount()) {}

TimerWheel::TimerWheel(const ITickProvider& ticks) : TimerWheel(TimerWheelOptions{}, ticks) {}

Milliseconds TimerWheel::GetGranularity() const noexcept { return GetScheduler().Granularity(); }

}  // namespace timerwheel
