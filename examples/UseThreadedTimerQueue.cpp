// The README's ThreadedTimerQueue example: a wheel that any thread may use, with a dispatch thread
// of its own running the callbacks.
// [readme]
#include <cstdio>
#include <future>

#include "TimerQueue/ThreadedTimerQueue.h"
#include "TimerWheel/TimerWheel.h"

struct KeepAlive final : timerwheel::ITimer {  // runs on the driver's dispatch thread
  void OnTimer(timerwheel::UserData connection) override {
    std::printf("keepalive for connection %u\n", static_cast<unsigned>(connection));
    sent.set_value();
  }
  std::promise<void> sent;
};

int main() {
  timerwheel::TimerWheel wheel;
  KeepAlive keepAlive;                           // outlives every arming that names it
  timerwheel::ThreadedTimerQueue timers(wheel);  // from here on, use the wheel through `timers`
  std::future<void> sent = keepAlive.sent.get_future();

  timerwheel::TimerHandle timer = timers.CreateTimer();  // any thread may call these
  timers.SetTimer(timer, keepAlive, 100, /*userData*/ 7);
  sent.wait();
  timers.DestroyTimer(timer);
}  // ~ThreadedTimerQueue stops its thread before keepAlive and the wheel go
// [/readme]
