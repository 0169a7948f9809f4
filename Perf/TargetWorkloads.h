// The workloads of the timer core's targets (issue 15), W1-W5, written once over the adapters and
// compared against the floor (Adapters/FloorWheelAdapter.h). Perf/README.md says what each models.
#pragma once

#include <cstdint>
#include <vector>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_TOGGLE_COLLECT
#endif

#include "Workloads.h"

namespace timerwheel::perf {

// One run of a target workload: ns per unit (a pair, a re-arm, a fired timer, an operation),
// how many units were timed, and a checksum of which timers fired (equal across
// implementations that behave the same).
struct TargetResult {
  double nanoseconds = 0;
  std::uint64_t units = 0;
  std::uint64_t checksum = 0;
};

// The timed part of a workload, and the only part callgrind counts when run with
// --collect-atstart=no (tools/count-instructions): the toggles are a few no-op instructions
// outside valgrind.
class TimedSection {
 public:
  TimedSection() {
    CALLGRIND_TOGGLE_COLLECT;
    m_start = BenchClock::now();
  }
  BenchClock::duration Stop() {
    const auto elapsed = BenchClock::now() - m_start;
    CALLGRIND_TOGGLE_COLLECT;
    return elapsed;
  }

 private:
  BenchClock::time_point m_start;
};

// After the timed part: fire everything still armed (a minute of virtual time, one 15 ms slot at
// a time) so the checksum covers every timer the workload left pending.
template <class Adapter>
std::uint64_t DrainChecksum(Adapter& adapter, FiringLog& log) {
  for (int step = 0; step < 61'500 / 15; ++step) {
    BenchmarkClock::Advance(15);
    adapter.RunDue();
  }
  return log.timerSum + log.fired;
}

// A timeout near `timeout` whose deadline falls on a 15 ms boundary, so the 15 ms wheels and the
// exact heap fire a timer at the same instant and the checksums can be compared.
inline Milliseconds OnSlotBoundary(Milliseconds timeout) {
  return timeout - static_cast<Milliseconds>((BenchmarkClock::Now() + timeout) % 15);
}

// W1. Hot arm + cancel of one timer (an earlier timer stays armed). ns per pair.
template <class Adapter>
TargetResult W1ArmCancel(std::size_t pairs) {
  FiringLog log;
  Adapter adapter(2, log);
  const std::size_t timer = adapter.Create();
  ArmEarlierSentinel(adapter);
  TimedSection timed;
  for (std::size_t i = 0; i < pairs; ++i) {
    adapter.Arm(timer, static_cast<Milliseconds>(200 + i % 64));
    adapter.Cancel(timer);
    if (i % kPollEvery == 0) adapter.RunDue();
  }
  const auto elapsed = timed.Stop();
  return {NanosecondsPer(elapsed, pairs), pairs, DrainChecksum(adapter, log)};
}

// W2. Hot re-arm of a pending timer (200-263 ms: a retransmit timer re-armed on every ACK while
// the clock stands still; most re-arms land in the slot the timer is in). ns per re-arm.
template <class Adapter>
TargetResult W2Rearm(std::size_t rearms) {
  FiringLog log;
  Adapter adapter(2, log);
  const std::size_t timer = adapter.Create();
  ArmEarlierSentinel(adapter);
  adapter.Arm(timer, 200);
  TimedSection timed;
  for (std::size_t i = 0; i < rearms; ++i) {
    adapter.Arm(timer, static_cast<Milliseconds>(200 + i % 64));
    if (i % kPollEvery == 0) adapter.RunDue();
  }
  const auto elapsed = timed.Stop();
  return {NanosecondsPer(elapsed, rearms), rearms, DrainChecksum(adapter, log)};
}

// W3. Cancel + re-arm of a random timer among N live ones (40-59 s), in random order: the cache
// behaviour of a server's timers. ns per pair.
template <class Adapter>
TargetResult W3CancelRearm(std::size_t live, std::size_t pairs) {
  FiringLog log;
  Adapter adapter(live, log);
  const auto timeouts = RandomNumbers(live, 19'000, 4);
  for (std::size_t i = 0; i < live; ++i) adapter.Arm(adapter.Create(), 40'000 + timeouts[i]);
  const auto picks = RandomNumbers(pairs, static_cast<std::uint32_t>(live), 5);
  const auto rearms = RandomNumbers(pairs, 19'000, 7);
  TimedSection timed;
  for (std::size_t i = 0; i < pairs; ++i) {
    adapter.Cancel(picks[i]);
    adapter.Arm(picks[i], 40'000 + rearms[i]);
    if (i % kPollEvery == 0) adapter.RunDue();
  }
  const auto elapsed = timed.Stop();
  return {NanosecondsPer(elapsed, pairs), pairs, DrainChecksum(adapter, log)};
}

// W4. Arm + fire: batches of 1,000 timers armed for 5 ms, the clock moved 20 ms, the batch fired,
// with 10k long timers live alongside. ns per fired timer (its arm included).
template <class Adapter>
TargetResult W4ArmFire(std::size_t live, std::size_t timersFired) {
  std::uint64_t checksum = 0;
  FiringLog log;
  constexpr std::size_t kBatch = 1000;
  Adapter adapter(live + kBatch, log);
  const auto timeouts = RandomNumbers(live, 19'000, 6);
  for (std::size_t i = 0; i < live; ++i) adapter.Arm(adapter.Create(), 40'000 + timeouts[i]);
  std::vector<std::size_t> batch(kBatch);
  for (auto& timer : batch) timer = adapter.Create();
  TimedSection timed;
  std::size_t done = 0;
  for (; done < timersFired; done += kBatch) {
    for (std::size_t timer : batch) adapter.Arm(timer, 5);
    BenchmarkClock::Advance(20);
    adapter.RunDue();
  }
  const auto elapsed = timed.Stop();
  checksum = DrainChecksum(adapter, log);
  return {NanosecondsPer(elapsed, done), done, checksum};
}

// W5. Retransmit mix over N live timers: each operation picks a random timer and re-arms it to
// 200-300 ms (90 %), cancels and re-arms it (9 %), or moves the clock 1 ms and fires what is due
// (1 %); a timer that fires is re-armed (a retransmission backs off), so N stay live. Deadlines
// are put on 15 ms boundaries (OnSlotBoundary) so every implementation fires the same timers.
// ns per operation (arm, cancel, fired timer).
template <class Adapter>
TargetResult W5RetransmitMix(std::size_t live, std::size_t operations) {
  // Start on a slot boundary: the timers' phase against the slots is then the same in every run,
  // whatever earlier runs did to the shared clock.
  BenchmarkClock::Advance((15 - BenchmarkClock::Now() % 15) % 15);
  FiringLog log;
  std::vector<std::uint64_t> fired;
  log.collect = &fired;
  Adapter adapter(live, log);
  const auto initial = RandomNumbers(live, 101, 8);
  for (std::size_t i = 0; i < live; ++i)
    adapter.Arm(adapter.Create(), OnSlotBoundary(200 + initial[i]));
  const auto picks = RandomNumbers(operations, static_cast<std::uint32_t>(live), 9);
  const auto kinds = RandomNumbers(operations, 100, 10);
  const auto timeouts = RandomNumbers(operations, 101, 11);
  fired.reserve(live);
  std::uint64_t units = 0;
  TimedSection timed;
  for (std::size_t i = 0; i < operations; ++i) {
    const Milliseconds timeout = 200 + timeouts[i];
    if (kinds[i] < 90) {
      adapter.Arm(picks[i], OnSlotBoundary(timeout));
      ++units;
    } else if (kinds[i] < 99) {
      adapter.Cancel(picks[i]);
      adapter.Arm(picks[i], OnSlotBoundary(timeout));
      units += 2;
    } else {
      BenchmarkClock::Advance(1);
      fired.clear();
      adapter.RunDue();
      for (std::uint64_t timer : fired) adapter.Arm(timer, OnSlotBoundary(timeout));
      units += 2 * fired.size();
    }
  }
  const auto elapsed = timed.Stop();
  log.collect = nullptr;
  return {NanosecondsPer(elapsed, units), units, DrainChecksum(adapter, log)};
}

}  // namespace timerwheel::perf
