// What fired when, and a check that timers fired at the clock steps their deadlines say.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "Support/WaitableCount.h"
#include "TimerQueue/TimerTypes.h"

namespace timerwheel::test {

// Firings of timers whose firing times the test knows: the index each was set with and the clock
// when it ran.
class FiringLog {
 public:
  struct Entry {
    UserData index;
    Ticks at;
  };
  void Record(UserData index, Ticks at) {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_entries.push_back({index, at});
    }
    m_count.Add();
  }
  std::vector<Entry> Entries() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_entries;
  }
  bool WaitFor(std::size_t atLeast) { return m_count.WaitFor(atLeast); }

 private:
  std::mutex m_mutex;
  std::vector<Entry> m_entries;
  WaitableCount m_count;
};

struct PlannedFiring {
  UserData index;  // set in increasing index order, so ties fire in index order
  Ticks firesAt;   // when the queue's rules say it fires (the wheel rounds up to a slot)
};

// Moves the clock through `steps` (absolute times, the first the current one, via `advanceTo`)
// and after each waits for exactly the planned timers due by then. Then checks that every planned
// timer fired exactly once, at the first step at or after its firing time (never early, never a
// step late), in firing order (ties in set order). `log` holds `logged` earlier entries, which are
// not checked again.
template <class AdvanceTo>
void StepClockAndCheck(std::vector<PlannedFiring> planned, const std::vector<Ticks>& steps,
                       AdvanceTo advanceTo, FiringLog& log, std::size_t logged) {
  std::stable_sort(
      planned.begin(), planned.end(),
      [](const PlannedFiring& a, const PlannedFiring& b) { return a.firesAt < b.firesAt; });
  for (const Ticks step : steps) {
    advanceTo(step);
    const auto due = static_cast<std::size_t>(std::count_if(
        planned.begin(), planned.end(), [&](const PlannedFiring& p) { return p.firesAt <= step; }));
    INFO("clock at " << step << ": " << due << " of " << planned.size() << " timers due");
    REQUIRE(log.WaitFor(logged + due));
  }
  REQUIRE(planned.back().firesAt <= steps.back());
  const std::vector<FiringLog::Entry> entries = log.Entries();
  REQUIRE(entries.size() == logged + planned.size());
  std::size_t wrongOrder = 0, wrongTime = 0;
  std::string firstWrongOrder, firstWrongTime;
  for (std::size_t i = 0; i < planned.size(); ++i) {
    const FiringLog::Entry& entry = entries[logged + i];
    const Ticks expectedAt = *std::lower_bound(steps.begin(), steps.end(), planned[i].firesAt);
    if (entry.index != planned[i].index) {
      if (wrongOrder++ == 0) {
        firstWrongOrder = "position " + std::to_string(i) + " fired timer " +
                          std::to_string(entry.index) + ", expected " +
                          std::to_string(planned[i].index);
      }
    } else if (entry.at != expectedAt) {
      if (wrongTime++ == 0) {
        firstWrongTime = "timer " + std::to_string(entry.index) + " due at " +
                         std::to_string(planned[i].firesAt) + " fired at " +
                         std::to_string(entry.at) + ", expected at " + std::to_string(expectedAt);
      }
    }
  }
  INFO("first out of order: " << firstWrongOrder);
  INFO("first at the wrong time: " << firstWrongTime);
  CHECK(wrongOrder == 0);
  CHECK(wrongTime == 0);
}

}  // namespace timerwheel::test
