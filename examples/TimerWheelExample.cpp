// Sets, re-arms, cancels and fires timers on the heap TimerQueue and on the TimerWheel with the
// system clock, dispatching from a simple single-threaded loop, and prints what happened.
#include <chrono>
#include <cstdio>
#include <thread>

#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/SystemTickProvider.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"

using namespace timerwheel;

namespace {

class PrintingTimer final : public ITimer {
 public:
  PrintingTimer(const char* queueName, Ticks start) : m_queueName(queueName), m_start(start) {}

  void OnTimer(UserData userData) override {
    const Ticks now = SystemTickProvider::Instance().GetTickCount();
    std::printf("  %-6s timer %2u fired at +%3llu ms\n", m_queueName,
                static_cast<unsigned>(userData), static_cast<unsigned long long>(now - m_start));
  }

 private:
  const char* m_queueName;
  Ticks m_start;
};

// A single-threaded event loop: sleep until the next timer is due, then dispatch.
void RunUntilIdle(IManageTimerQueue& queue) {
  for (Milliseconds next = queue.GetNextTimeout(); next != kInfinite;
       next = queue.GetNextTimeout()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(next));
    queue.HandleTimeouts();
  }
}

void Demonstrate(const char* name, IManageTimerQueue& queue, CountingTimerQueueMonitor& monitor) {
  std::printf("%s (maximum timeout %u ms):\n", name, queue.GetMaximumTimeout());
  PrintingTimer timer(name, SystemTickProvider::Instance().GetTickCount());

  TimerHandle retransmit = queue.CreateTimer();
  TimerHandle keepalive = queue.CreateTimer();
  TimerHandle idle = queue.CreateTimer();
  queue.SetTimer(retransmit, timer, 200, 1);
  queue.SetTimer(keepalive, timer, 100, 2);
  queue.SetTimer(idle, timer, 300, 3);
  queue.SetOneShotTimer(timer, 50, 4);

  // An ACK arrives: the retransmit timer is re-armed (it would have fired at 200 ms)...
  const bool wasPending = queue.SetTimer(retransmit, timer, 250, 5);
  std::printf("  re-armed the retransmit timer (was pending: %s)\n", wasPending ? "yes" : "no");
  // ...and the connection closes before the idle timeout.
  std::printf("  cancelled the idle timer (was pending: %s)\n",
              queue.CancelTimer(idle) ? "yes" : "no");

  RunUntilIdle(queue);
  queue.DestroyTimer(retransmit);
  queue.DestroyTimer(keepalive);
  queue.DestroyTimer(idle);
  std::printf("  set %llu, cancelled %llu, fired %llu, live timers now %llu\n\n",
              static_cast<unsigned long long>(monitor.Set()),
              static_cast<unsigned long long>(monitor.Cancelled()),
              static_cast<unsigned long long>(monitor.Fired()),
              static_cast<unsigned long long>(monitor.LiveTimers()));
}

}  // namespace

int main() {
  CountingTimerQueueMonitor heapMonitor;
  TimerQueueOptions heapOptions;
  heapOptions.monitor = &heapMonitor;
  TimerQueue heap(heapOptions);
  Demonstrate("heap", heap, heapMonitor);

  CountingTimerQueueMonitor wheelMonitor;
  TimerWheelOptions wheelOptions;
  wheelOptions.maximumTimeout = 60'000;
  wheelOptions.granularity = 15;
  wheelOptions.monitor = &wheelMonitor;
  TimerWheel wheel(wheelOptions);
  Demonstrate("wheel", wheel, wheelMonitor);
  return heapMonitor.LiveTimers() == 0 && wheelMonitor.LiveTimers() == 0 ? 0 : 1;
}
