// Cost of the hot operations (re-arm, cancel, GetNextTimeout) of the heap and the wheel with
// N live timers, none of which fire. A quick harness for the wheel issue; the side-by-side
// benchmark against other libraries is separate.
//
// The clock is a plain variable, so the figures are the data structures' own cost; the last table
// puts the production clocks (SystemTickProvider, CoarseTickProvider) beside it, alone and in the
// wheel's W1 pair. Usage: TimerWheelOperationCost [--quick]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "TimerQueue/SystemTickProvider.h"
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

// The clock's share of a set: one provider read alone, then W1 (arm + cancel of one timer, an
// earlier one armed) on a wheel reading `ticks`. Minimum of `repeats` runs, ns per read / pair.
struct ClockCost {
  double readNs, pairNs;
};

ClockCost MeasureClock(const ITickProvider& ticks, std::size_t operations, int repeats) {
  using Clock = std::chrono::steady_clock;
  NeverFires timer;
  ClockCost best{1e300, 1e300};
  for (int r = 0; r < repeats; ++r) {
    Ticks sum = 0;
    auto start = Clock::now();
    for (std::size_t i = 0; i < operations; ++i) sum += ticks.GetTickCount();
    const double readNs = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                          static_cast<double>(operations);
    if (sum == 1) std::puts("");  // keep the reads
    TimerWheel wheel(TimerWheelOptions{}, ticks);
    TimerHandle earlier = wheel.CreateTimer(), handle = wheel.CreateTimer();
    wheel.SetTimer(earlier, timer, 100, 0);
    start = Clock::now();
    for (std::size_t i = 0; i < operations; ++i) {
      wheel.SetTimer(handle, timer, static_cast<Milliseconds>(200 + i % 64), i);
      wheel.CancelTimer(handle);
    }
    const double pairNs = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                          static_cast<double>(operations);
    wheel.DestroyTimer(earlier);
    wheel.DestroyTimer(handle);
    best = {std::min(best.readNs, readNs), std::min(best.pairNs, pairNs)};
  }
  return best;
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
  // What the clock adds to every SetTimer: the production provider against a plain variable.
  const std::size_t reads = quick ? 100'000 : 2'000'000;
  const ClockCost variable = MeasureClock(ticks, reads, repeats);
  const ClockCost system = MeasureClock(SystemTickProvider::Instance(), reads, repeats);
  const ClockCost coarse = MeasureClock(CoarseTickProvider::Instance(), reads, repeats);
  std::printf("\n%-30s %14s %24s\n", "clock (minimum of runs)", "ns per read",
              "wheel W1 ns per pair");
  std::printf("%-30s %14.1f %24.1f\n", "variable (benchmark clock)", variable.readNs,
              variable.pairNs);
  std::printf("%-30s %14.1f %24.1f\n", "SystemTickProvider", system.readNs, system.pairNs);
  std::printf("%-30s %14.1f %24.1f\n", "CoarseTickProvider", coarse.readNs, coarse.pairNs);
  std::printf("(CoarseTickProvider's lag bound: %u ms added to every deadline)\n",
              static_cast<unsigned>(CoarseTickProvider::Instance().ReadingLagBound()));
  return 0;
}
