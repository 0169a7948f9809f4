#include "TimerQueue/TimerQueue.h"

namespace timerwheel {

TimerQueue::TimerQueue(TimerQueueOptions options, const ITickProvider& ticks)
    : BasicTimerQueue(ticks, options.monitor, options.initialCapacity) {}

TimerQueue::TimerQueue(const ITickProvider& ticks) : TimerQueue(TimerQueueOptions{}, ticks) {}

}  // namespace timerwheel
