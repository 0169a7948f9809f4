// Cost of the hot operations (re-arm, cancel, GetNextTimeout) of the heap and the wheel with
// N live timers, none of which fire. A quick harness for the wheel issue; the side-by-side
// benchmark against other libraries is separate.
//
// The clock is a plain variable, so the figures are the data structures' own cost (a real clock
// read adds ~20 ns on Linux). Usage: TimerWheelOperationCost [--quick]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"

using namespace timerwheel;

namespace {

class VariableTicks final : public ITickProvider {
 public:
  Ticks GetTickCount() const override { return now; }
  Ticks now = 1'000'000'007;
};

class NeverFires final : public ITimer {
 public:
  void OnTimer(UserData) override { std::abort(); }
};

struct Result {
  double setNs, cancelNs, nextTimeoutNs;
};

template <class Queue>
Result Measure(Queue& queue, std::size_t liveTimers, std::size_t operations) {
  NeverFires timer;
  std::mt19937_64 random(42);
  std::vector<TimerHandle> handles(liveTimers);
  for (TimerHandle& handle : handles) {
    handle = queue.CreateTimer();
    queue.SetTimer(handle, timer, 1000 + random() % 58'000, 0);
  }
  // Pre-drawn random choices, so the timed loops measure the queue, not the generator.
  std::vector<std::uint32_t> picks(operations), timeouts(operations);
  for (std::size_t i = 0; i < operations; ++i) {
    picks[i] = static_cast<std::uint32_t>(random() % liveTimers);
    timeouts[i] = static_cast<std::uint32_t>(1000 + random() % 58'000);
  }
  using Clock = std::chrono::steady_clock;
  auto nsPerOp = [&](Clock::duration elapsed) {
    return std::chrono::duration<double, std::nano>(elapsed).count() /
           static_cast<double>(operations);
  };

  auto start = Clock::now();
  for (std::size_t i = 0; i < operations; ++i)
    queue.SetTimer(handles[picks[i]], timer, timeouts[i], i);
  const double setNs = nsPerOp(Clock::now() - start);

  start = Clock::now();
  Milliseconds sink = 0;
  for (std::size_t i = 0; i < operations; ++i) {
    queue.SetTimer(handles[picks[i]], timer, timeouts[i], i);
    sink += queue.GetNextTimeout();
  }
  const double setAndNextNs = nsPerOp(Clock::now() - start);

  // Cancel distinct pending timers (a random permutation), then re-arm them untimed.
  std::vector<std::uint32_t> order(liveTimers);
  for (std::uint32_t i = 0; i < liveTimers; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), random);
  const std::size_t cancels = std::min(operations, liveTimers);
  start = Clock::now();
  for (std::size_t i = 0; i < cancels; ++i) queue.CancelTimer(handles[order[i]]);
  const double cancelNs = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                          static_cast<double>(cancels);

  for (TimerHandle& handle : handles) queue.DestroyTimer(handle);
  if (sink == 1) std::puts("");  // keep the GetNextTimeout results alive
  return {setNs, cancelNs, setAndNextNs - setNs};
}

template <class MakeQueue>
Result Median(MakeQueue makeQueue, std::size_t liveTimers, std::size_t operations, int repeats) {
  std::vector<Result> results;
  for (int r = 0; r < repeats; ++r) {
    auto queue = makeQueue();
    results.push_back(Measure(*queue, liveTimers, operations));
  }
  auto median = [&](double Result::*field) {
    std::vector<double> values;
    for (const Result& result : results) values.push_back(result.*field);
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  return {median(&Result::setNs), median(&Result::cancelNs), median(&Result::nextTimeoutNs)};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int repeats = quick ? 1 : 5;
  VariableTicks ticks;
  std::printf("%-6s %10s %12s %12s %16s\n", "queue", "live", "re-arm ns", "cancel ns",
              "NextTimeout ns");
  for (std::size_t live : {std::size_t{10'000}, std::size_t{1'000'000}}) {
    const std::size_t operations = quick ? 100'000 : 2'000'000;
    const Result heap = Median(
        [&] {
          TimerQueueOptions options;
          options.initialCapacity = live;
          return std::make_unique<TimerQueue>(options, ticks);
        },
        live, operations, repeats);
    const Result wheel = Median(
        [&] {
          TimerWheelOptions options;
          options.initialCapacity = live;
          return std::make_unique<TimerWheel>(options, ticks);
        },
        live, operations, repeats);
    std::printf("%-6s %10zu %12.1f %12.1f %16.1f\n", "heap", live, heap.setNs, heap.cancelNs,
                heap.nextTimeoutNs);
    std::printf("%-6s %10zu %12.1f %12.1f %16.1f\n", "wheel", live, wheel.setNs, wheel.cancelNs,
                wheel.nextTimeoutNs);
  }
  return 0;
}
