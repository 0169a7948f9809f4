// How late timers fire through the drivers in real time: 10,000 timers with timeouts spread over
// two seconds, per driver x dispatch policy x implementation. Reports lateness (fire time minus
// set time + timeout, measured with steady_clock in microseconds) at p50 / p99 / max, and how many
// times the dispatch thread woke up. Usage: TimerWheelDispatchLateness [--quick]
#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "TimerQueue/AsioTimerQueue.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/ThreadedTimerQueue.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"

using namespace timerwheel;
using Clock = std::chrono::steady_clock;

namespace {

class LatenessRecorder final : public ITimer {
 public:
  LatenessRecorder(std::vector<Clock::time_point>& due, std::size_t count)
      : m_due(due), m_lateness(count), m_remaining(count) {}

  void OnTimer(UserData index) override {
    const auto late = Clock::now() - m_due[index];
    m_lateness[index] = std::chrono::duration<double, std::milli>(late).count();
    if (--m_remaining == 0) m_done.set_value();
  }

  bool WaitAll(std::chrono::seconds timeout) {
    return m_done.get_future().wait_for(timeout) == std::future_status::ready;
  }
  std::vector<double> Sorted() const {
    std::vector<double> sorted = m_lateness;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }

 private:
  std::vector<Clock::time_point>& m_due;
  std::vector<double> m_lateness;
  std::atomic<std::size_t> m_remaining;
  std::promise<void> m_done;
};

// Sets `count` timers through `driver`, waits for all of them to fire, returns their lateness.
std::unique_ptr<LatenessRecorder> Run(ITimerQueue& driver, std::size_t count, Milliseconds spread,
                                      std::vector<Clock::time_point>& due) {
  std::mt19937 random(7);
  std::vector<TimerHandle> handles(count);
  due.assign(count, {});
  auto recorder = std::make_unique<LatenessRecorder>(due, count);
  for (std::size_t i = 0; i < count; ++i) {
    handles[i] = driver.CreateTimer();
    const Milliseconds timeout = 1 + random() % spread;
    due[i] = Clock::now() + std::chrono::milliseconds(timeout);
    driver.SetTimer(handles[i], *recorder, timeout, i);
  }
  if (!recorder->WaitAll(std::chrono::seconds(60))) std::printf("not every timer fired\n");
  for (TimerHandle& handle : handles) driver.DestroyTimer(handle);
  return recorder;
}

void Report(const char* driverName, const char* policy, const char* queueName,
            const LatenessRecorder& recorder, const CountingTimerQueueMonitor& monitor) {
  const auto sorted = recorder.Sorted();
  auto at = [&](double quantile) {
    return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(
                                                  quantile * static_cast<double>(sorted.size())))];
  };
  std::printf("%-9s %-13s %-6s %9.2f %9.2f %9.2f %9llu\n", driverName, policy, queueName, at(0.5),
              at(0.99), sorted.back(), static_cast<unsigned long long>(monitor.WakeUps()));
}

template <class MakeQueue>
void MeasureQueue(const char* queueName, MakeQueue makeQueue, std::size_t count,
                  Milliseconds spread) {
  for (DispatchPolicy policy : {DispatchPolicy::WithoutLock, DispatchPolicy::WithLockHeld}) {
    const char* policyName = policy == DispatchPolicy::WithoutLock ? "without-lock" : "lock-held";
    {
      CountingTimerQueueMonitor monitor;
      auto queue = makeQueue(&monitor);
      ThreadedTimerQueueOptions options;
      options.dispatchPolicy = policy;
      options.monitor = &monitor;
      ThreadedTimerQueue driver(*queue, options);
      std::vector<Clock::time_point> due;
      const auto recorder = Run(driver, count, spread, due);
      Report("threaded", policyName, queueName, *recorder, monitor);
    }
    {
      CountingTimerQueueMonitor monitor;
      auto queue = makeQueue(&monitor);
      boost::asio::io_context io;
      auto work = boost::asio::make_work_guard(io);
      AsioTimerQueueOptions options;
      options.dispatchPolicy = policy;
      options.monitor = &monitor;
      auto driver = std::make_unique<AsioTimerQueue>(io, *queue, options);
      std::thread ioThread([&] { io.run(); });
      std::vector<Clock::time_point> due;
      const auto recorder = Run(*driver, count, spread, due);
      Report("asio", policyName, queueName, *recorder, monitor);
      driver.reset();
      work.reset();
      ioThread.join();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::size_t count = quick ? 1000 : 10'000;
  const Milliseconds spread = quick ? 200 : 2000;
  std::printf("%zu timers, timeouts 1..%u ms, system clock; lateness in ms\n", count, spread);
  std::printf("%-9s %-13s %-6s %9s %9s %9s %9s\n", "driver", "policy", "queue", "p50", "p99", "max",
              "wake-ups");
  MeasureQueue(
      "heap",
      [](ITimerQueueMonitor* monitor) {
        TimerQueueOptions options;
        options.monitor = monitor;
        return std::make_unique<TimerQueue>(options);
      },
      count, spread);
  MeasureQueue(
      "wheel",
      [](ITimerQueueMonitor* monitor) {
        TimerWheelOptions options;
        options.monitor = monitor;
        return std::make_unique<TimerWheel>(options);
      },
      count, spread);
  return 0;
}
