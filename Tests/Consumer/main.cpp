// Uses an installed TimerWheel: sets a timer on each queue and checks that it is pending.
#include <cstdio>

#include "TimerQueue/ITimer.h"
#include "TimerQueue/TimerQueue.h"
#ifdef CONSUMER_HAS_TIMERWHEEL
#include "TimerWheel/TimerWheel.h"
#endif

namespace {

struct NoOpTimer : timerwheel::ITimer {
  void OnTimer(timerwheel::UserData) override {}
};

// Returns true when a timer set on `queue` reports itself pending.
template <typename Queue>
bool SetTimerIsPending(Queue& queue, const char* name) {
  NoOpTimer timer;
  timerwheel::TimerHandle handle = queue.CreateTimer();
  queue.SetTimer(handle, timer, 1000, 42);
  const bool pending = queue.TimerIsSet(handle);
  queue.DestroyTimer(handle);
  std::printf("%s: timer %s\n", name, pending ? "pending" : "NOT pending");
  return pending;
}

}  // namespace

int main() {
  bool ok = true;
  timerwheel::TimerQueue heap;  // default construction: the system tick provider
  ok = SetTimerIsPending(heap, "TimerQueue") && ok;
#ifdef CONSUMER_HAS_TIMERWHEEL
  timerwheel::TimerWheel wheel;
  ok = SetTimerIsPending(wheel, "TimerWheel") && ok;
#endif
  std::printf("consumer: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
