// The README's AsioTimerQueue example: timer callbacks run as handlers on a
// boost::asio::io_context.
// [readme]
#include <boost/asio/io_context.hpp>
#include <cstdio>

#include "TimerQueue/AsioTimerQueue.h"
#include "TimerWheel/TimerWheel.h"

struct IdleTimeout final : timerwheel::ITimer {  // runs on a thread inside io.run()
  void OnTimer(timerwheel::UserData connection) override {
    std::printf("connection %u is idle: closing it\n", static_cast<unsigned>(connection));
  }
};

int main() {
  boost::asio::io_context io;  // one thread runs it here; a server may use a pool
  timerwheel::TimerWheel wheel;
  timerwheel::AsioTimerQueue timers(io, wheel);  // destroyed before the wheel and io
  IdleTimeout idle;

  timerwheel::TimerHandle timer = timers.CreateTimer();
  timers.SetTimer(timer, idle, 100, /*userData*/ 3);
  io.run();  // returns once nothing is set: the driver holds no work guard of its own
  timers.DestroyTimer(timer);
}
// [/readme]
