// The benchmark's virtual time: one millisecond counter that workloads advance by hand, seen by
// every implementation that lets its clock be replaced (ours, Asio, the std baselines).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "TimerQueue/ITickProvider.h"

namespace timerwheel::perf {

class BenchmarkClock {
 public:
  static Ticks Now() noexcept { return s_now; }
  static void Advance(Ticks milliseconds) noexcept {
    s_now += milliseconds;
    s_counter.store(s_now, std::memory_order_relaxed);
  }
  // The same time as an atomic counter, for BenchmarkTickProvider::ReadingCounter. Now() stays a
  // plain variable so that the other implementations, the floor above all, compile exactly as
  // before the counter existed (the compiler may keep a plain read in a register across a loop;
  // it reloads an atomic one every time).
  static const std::atomic<Ticks>& Counter() noexcept { return s_counter; }

 private:
  static inline Ticks s_now = 1'000'000'007;
  static inline std::atomic<Ticks> s_counter{1'000'000'007};
};

// For TimerQueue and TimerWheel: a plain read, no system call, like a driver's cached loop time.
// The queues read the counter itself (ReadingCounter): one load, as the floor's caller passes
// the time.
class BenchmarkTickProvider final : public ITickProvider {
 public:
  Ticks GetTickCount() const override { return BenchmarkClock::Now(); }
  const std::atomic<Ticks>* ReadingCounter() const noexcept override {
    return &BenchmarkClock::Counter();
  }
};

// For boost::asio::basic_waitable_timer: a chrono clock over the same counter.
struct BenchmarkChronoClock {
  using duration = std::chrono::milliseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<BenchmarkChronoClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept {
    return time_point(duration(static_cast<rep>(BenchmarkClock::Now())));
  }
};

// What every adapter's callbacks feed: how many fired, and a checksum of which and when, so
// that two implementations can be compared for identical behaviour.
struct FiringLog {
  std::uint64_t fired = 0;
  std::uint64_t timerSum = 0;  // order-independent: equal when the same timers fired
  std::vector<std::uint64_t>* collect = nullptr;  // if set, every fired timer is appended
  void Record(std::uint64_t timer) {
    ++fired;
    timerSum += (timer + 1) * 0x9E3779B97F4A7C15ull;
    if (collect != nullptr) collect->push_back(timer);
  }
};

}  // namespace timerwheel::perf
