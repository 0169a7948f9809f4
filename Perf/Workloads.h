// The benchmark's workloads, written once as templates over the adapters (Perf/README.md says
// what each one models). Each returns nanoseconds per operation for one run on a fresh adapter.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "BenchmarkClock.h"

namespace timerwheel::perf {

using BenchClock = std::chrono::steady_clock;

inline double NanosecondsPer(BenchClock::duration elapsed, std::uint64_t operations) {
  return std::chrono::duration<double, std::nano>(elapsed).count() /
         static_cast<double>(operations);
}

// Pre-drawn random numbers, so that timed loops measure the timers, not the generator.
inline std::vector<std::uint32_t> RandomNumbers(std::size_t count, std::uint32_t bound,
                                                unsigned seed) {
  std::mt19937 random(seed);
  std::vector<std::uint32_t> numbers(count);
  for (auto& n : numbers) n = random() % bound;
  return numbers;
}

// Hot loops let the implementation run its loop now and then, as a server would: Asio, for one,
// queues a completion for every cancelled wait until the io_context runs.
inline constexpr std::size_t kPollEvery = 1024;

// In a server some other timer is almost always due sooner than the one being re-armed; without
// one, every arm in a hot loop makes a new earliest (for Asio, a reactor system call each time).
template <class Adapter>
void ArmEarlierSentinel(Adapter& adapter) {
  adapter.Arm(adapter.Create(), 1);  // the clock does not move in these loops: it never fires
}

// 1a. Create N timers.
template <class Adapter>
double CreateTimers(std::size_t timers) {
  FiringLog log;
  Adapter adapter(timers, log);
  const auto start = BenchClock::now();
  for (std::size_t i = 0; i < timers; ++i) adapter.Create();
  return NanosecondsPer(BenchClock::now() - start, timers);
}

// 1b/1c. Set `handles` timers round-robin (1: the same timer every time), timeouts 2 + i % 4000.
template <class Adapter>
double SetRoundRobin(std::size_t handles, std::size_t operations) {
  FiringLog log;
  Adapter adapter(handles + 1, log);
  for (std::size_t i = 0; i < handles; ++i) adapter.Create();
  ArmEarlierSentinel(adapter);
  const auto start = BenchClock::now();
  for (std::size_t i = 0; i < operations; ++i) {
    adapter.Arm(i % handles, static_cast<Milliseconds>(2 + i % 4000));
    if (i % kPollEvery == 0) adapter.RunDue();
  }
  return NanosecondsPer(BenchClock::now() - start, operations);
}

// 1d. 1,000 timers set 100 rounds with equal deadlines (the clock does not move).
template <class Adapter>
double SetEqualDeadlines(std::size_t handles, std::size_t rounds) {
  FiringLog log;
  Adapter adapter(handles, log);
  for (std::size_t i = 0; i < handles; ++i) adapter.Create();
  const auto start = BenchClock::now();
  for (std::size_t r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < handles; ++i) adapter.Arm(i, 1000);
    adapter.RunDue();
  }
  return NanosecondsPer(BenchClock::now() - start, handles * rounds);
}

// 1e. Set N timers (timeouts i % 4000), then fire them all, moving the clock to each next expiry
// (1 ms steps for an implementation that cannot say when that is). Per timer, set + fire.
template <class Adapter>
double SetAndDrain(std::size_t timers, std::uint64_t& checksum) {
  FiringLog log;
  Adapter adapter(timers, log);
  for (std::size_t i = 0; i < timers; ++i) adapter.Create();
  const auto start = BenchClock::now();
  for (std::size_t i = 0; i < timers; ++i) adapter.Arm(i, static_cast<Milliseconds>(1 + i % 4000));
  while (log.fired < timers) {
    const Milliseconds next = adapter.NextTimeout();
    BenchmarkClock::Advance(next == kInfinite || next == 0 ? 1 : next);
    adapter.RunDue();
  }
  const double result = NanosecondsPer(BenchClock::now() - start, timers);
  checksum = log.fired;
  return result;
}

// 2. Retransmit-style: N live timers with long timeouts; each operation picks a random timer and
// re-arms it (90%), cancels and re-arms it (9%), or arms it to fire at once (1%); the due ones
// fire every 1,000 operations. Nanoseconds per operation (arm, cancel or fire).
template <class Adapter>
double Retransmit(std::size_t liveTimers, std::size_t operations, std::uint64_t& fired) {
  FiringLog log;
  Adapter adapter(liveTimers, log);
  const auto timeouts = RandomNumbers(liveTimers, 19'000, 1);
  for (std::size_t i = 0; i < liveTimers; ++i) adapter.Arm(adapter.Create(), 40'000 + timeouts[i]);
  const auto picks = RandomNumbers(operations, static_cast<std::uint32_t>(liveTimers), 2);
  const auto kinds = RandomNumbers(operations, 100, 3);
  std::uint64_t counted = 0;
  const auto start = BenchClock::now();
  for (std::size_t i = 0; i < operations; ++i) {
    const std::size_t timer = picks[i];
    const Milliseconds timeout = 40'000 + (picks[i] ^ kinds[i]) % 19'000;
    if (kinds[i] < 90) {
      adapter.Arm(timer, timeout);
      ++counted;
    } else if (kinds[i] < 99) {
      adapter.Cancel(timer);
      adapter.Arm(timer, timeout);
      counted += 2;
    } else {
      adapter.Arm(timer, 0);
      ++counted;
    }
    if (i % 1000 == 999) {
      if constexpr (Adapter::kVirtualTime) BenchmarkClock::Advance(15);  // one wheel slot
      counted += adapter.RunDue();
    }
  }
  const double result = NanosecondsPer(BenchClock::now() - start, counted);
  fired = log.fired;
  return result;
}

// 3a. Arm and cancel the same timer: the figure quoted for "timeouts that never fire", hot.
template <class Adapter>
double HotArmCancel(std::size_t pairs) {
  FiringLog log;
  Adapter adapter(2, log);
  const std::size_t timer = adapter.Create();
  ArmEarlierSentinel(adapter);
  const auto start = BenchClock::now();
  for (std::size_t i = 0; i < pairs; ++i) {
    adapter.Arm(timer, static_cast<Milliseconds>(30'000 + i % 64));
    adapter.Cancel(timer);
    if (i % kPollEvery == 0) adapter.RunDue();
  }
  return NanosecondsPer(BenchClock::now() - start, pairs);
}

// 3b. Cancel and re-arm a random timer among N live ones: the same, cold.
template <class Adapter>
double ColdCancelRearm(std::size_t liveTimers, std::size_t pairs) {
  FiringLog log;
  Adapter adapter(liveTimers, log);
  const auto timeouts = RandomNumbers(liveTimers, 19'000, 4);
  for (std::size_t i = 0; i < liveTimers; ++i) adapter.Arm(adapter.Create(), 40'000 + timeouts[i]);
  const auto picks = RandomNumbers(pairs, static_cast<std::uint32_t>(liveTimers), 5);
  const auto start = BenchClock::now();
  for (std::size_t i = 0; i < pairs; ++i) {
    adapter.Cancel(picks[i]);
    adapter.Arm(picks[i], 40'000 + timeouts[picks[i]] / 2);
    if (i % kPollEvery == 0) adapter.RunDue();
  }
  return NanosecondsPer(BenchClock::now() - start, pairs);
}

// 3c. Arm a timer and let it fire, with N long timers live alongside: "timers that do fire".
// Batches of 1,000 short timers (5 ms; 0 where the clock is real) fire together.
template <class Adapter>
double ArmAndFire(std::size_t liveTimers, std::size_t timersFired, std::uint64_t& checksum) {
  constexpr std::size_t kBatch = 1000;
  FiringLog log;
  Adapter adapter(liveTimers + kBatch, log);
  const auto timeouts = RandomNumbers(liveTimers, 19'000, 6);
  for (std::size_t i = 0; i < liveTimers; ++i) adapter.Arm(adapter.Create(), 40'000 + timeouts[i]);
  std::vector<std::size_t> batch(kBatch);
  for (auto& timer : batch) timer = adapter.Create();
  const auto start = BenchClock::now();
  for (std::size_t done = 0; done < timersFired; done += kBatch) {
    for (std::size_t timer : batch) adapter.Arm(timer, Adapter::kVirtualTime ? 5 : 0);
    if constexpr (Adapter::kVirtualTime) BenchmarkClock::Advance(20);
    adapter.RunDue();
  }
  const double result = NanosecondsPer(BenchClock::now() - start, timersFired);
  checksum = log.fired;
  return result;
}

// 4. A protocol-shaped mix, per work unit, over a fixed stretch of virtual time stepped 1 ms at
// a time: a short timer re-armed every 50 ms that always fires (10 ms), a long one set once that
// fires near the end, a long one re-armed every 5 ms that never fires, a medium one re-armed
// every 700 ms (1 s, never fires), and a medium one set every 300 ms (2 s) then cancelled 250 ms
// later. More work units mean more live timers in the same virtual time. Returns the run time in
// ms; `checksum` is order-independent, so it is equal for implementations that fire the same
// timers the same number of times.
template <class Adapter>
double ProtocolMix(std::size_t units, Ticks virtualMilliseconds, std::uint64_t& checksum) {
  enum Behaviour { kShort, kOnce, kRescheduled, kMedium, kCancelled, kBehaviours };
  FiringLog log;
  Adapter adapter(units * kBehaviours, log);
  for (std::size_t i = 0; i < units * kBehaviours; ++i) adapter.Create();
  auto timerOf = [](std::size_t unit, Behaviour b) { return unit * kBehaviours + b; };
  // Every `period` ms, the units whose phase has come act (phases spread units over the period).
  auto each = [&](Ticks t, Ticks period, auto&& act) {
    for (std::size_t unit = (period - t % period) % period; unit < units; unit += period) act(unit);
  };
  const auto start = BenchClock::now();
  for (std::size_t unit = 0; unit < units; ++unit) {
    adapter.Arm(timerOf(unit, kOnce),
                static_cast<Milliseconds>(virtualMilliseconds - 1000 + unit % 500));
  }
  for (Ticks t = 0; t < virtualMilliseconds; ++t) {
    // No short timer near the end: the wheel's rounding would leave one unfired at the cut-off.
    if (t + 100 < virtualMilliseconds)
      each(t, 50, [&](std::size_t u) { adapter.Arm(timerOf(u, kShort), 10); });
    each(t, 5, [&](std::size_t u) { adapter.Arm(timerOf(u, kRescheduled), 30'000); });
    each(t, 700, [&](std::size_t u) { adapter.Arm(timerOf(u, kMedium), 1000); });
    each(t, 300, [&](std::size_t u) { adapter.Arm(timerOf(u, kCancelled), 2000); });
    each(t + 50, 300, [&](std::size_t u) { adapter.Cancel(timerOf(u, kCancelled)); });  // 250 ms on
    BenchmarkClock::Advance(1);
    adapter.RunDue();
  }
  const double milliseconds =
      std::chrono::duration<double, std::milli>(BenchClock::now() - start).count();
  checksum = log.timerSum + log.fired;
  return milliseconds;
}

}  // namespace timerwheel::perf
