// The README's TimerWheel example: one wheel driven by a single-threaded event loop.
// [readme]
#include <chrono>
#include <cstdio>
#include <thread>

#include "TimerWheel/TimerWheel.h"

struct Retransmit final : timerwheel::ITimer {  // one object can serve many timers
  void OnTimer(timerwheel::UserData connection) override {
    std::printf("resending on connection %u\n", static_cast<unsigned>(connection));
  }
};

int main() {
  timerwheel::TimerWheel wheel;  // 60 s maximum timeout, 15 ms slots, the monotonic clock
  Retransmit retransmit;
  timerwheel::TimerHandle timer = wheel.CreateTimer();
  wheel.SetTimer(timer, retransmit, 200, /*userData*/ 42);  // on send
  wheel.SetTimer(timer, retransmit, 300, 42);               // on ACK: re-armed, O(1)

  // Wait for I/O or the next expiry (epoll_wait, select, ...), then run whatever is due.
  for (auto next = wheel.GetNextTimeout(); next != timerwheel::kInfinite;
       next = wheel.GetNextTimeout()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(next));
    wheel.HandleTimeouts();
  }
  wheel.DestroyTimer(timer);
}
// [/readme]
