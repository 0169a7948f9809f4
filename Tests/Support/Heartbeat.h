// A timer that keeps a driver polling a manual clock, and tells a test when it has seen a time.
#pragma once

#include <condition_variable>
#include <mutex>

#include "Support/FunctionTimer.h"
#include "Support/WaitableCount.h"
#include "TimerQueue/ITickProvider.h"
#include "TimerQueue/ITimerQueue.h"

namespace timerwheel::test {

// Keeps a driver looking at a manual clock. A driver sleeps in real time for as long as the
// queue's clock says the next expiry is away, so after the test moves the clock it would not look
// again for up to kMaximumSleep; a timer always due 1 ms (one slot) from now makes it poll.
class Heartbeat {
 public:
  Heartbeat(ITimerQueue& driver, const ITickProvider& ticks)
      : m_driver(driver), m_ticks(ticks), m_handle(driver.CreateTimer()) {
    m_driver.SetTimer(m_handle, m_timer, 1, 0);
  }
  // Waits until it has fired with the clock at `now` or later. Once every other timer due by then
  // has fired too, that dispatch has nothing left to run: a shutdown then leaves nothing
  // undispatched (the heartbeat itself is pending again, not due until the clock moves).
  bool WaitForBeatAt(Ticks now) {
    std::unique_lock<std::mutex> lock(m_mutex);
    return m_beaten.wait_for(lock, kGenerousWait, [&] { return m_lastBeat >= now; });
  }
  // Once the driver has shut down (its callback no longer runs).
  void Destroy() { m_driver.DestroyTimer(m_handle); }

 private:
  void Beat() {
    m_driver.SetTimer(m_handle, m_timer, 1, 0);
    std::lock_guard<std::mutex> lock(m_mutex);
    m_lastBeat = m_ticks.GetTickCount();
    m_beaten.notify_all();
  }

  ITimerQueue& m_driver;
  const ITickProvider& m_ticks;
  TimerHandle m_handle;
  FunctionTimer m_timer{[this](UserData) { Beat(); }};
  std::mutex m_mutex;
  std::condition_variable m_beaten;
  Ticks m_lastBeat = 0;
};

}  // namespace timerwheel::test
