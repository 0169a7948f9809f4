// A queue with a manual clock and a counting monitor, plus helpers the contract tests share.
#pragma once

#include <catch2/catch.hpp>
#include <memory>

#include "Support/ManualTickProvider.h"
#include "Support/QueueTraits.h"
#include "Support/RecordingTimer.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"

namespace timerwheel::test {

template <class Traits>
struct QueueFixture {
  ManualTickProvider ticks;
  CountingTimerQueueMonitor monitor;
  std::unique_ptr<typename Traits::Queue> queue = Traits::Make(ticks, &monitor);
  RecordingTimer timer{ticks};

  // When a timer set now with `timeout` fires.
  Ticks FiringTimeFor(Milliseconds timeout) const {
    return FiringTime<Traits>(ticks.Now() + timeout);
  }

  // Moves the clock to `when` (never backwards) and runs one complete dispatch.
  std::size_t DispatchAt(Ticks when) {
    ticks.SetTime(when);
    return queue->HandleTimeouts();
  }

  // Every test ends here: the queue is consistent and every record was freed.
  void RequireNoLeak() {
    queue->CheckInvariants();
    REQUIRE(monitor.LiveTimers() == 0);
  }
};

}  // namespace timerwheel::test
