// What only the wheel has: rounding to its granularity, no lag, long gaps, option checks.
#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "Support/ManualTickProvider.h"
#include "Support/RecordingTimer.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerWheel/Detail/Reciprocal.h"
#include "TimerWheel/TimerWheel.h"

using namespace timerwheel;
using namespace timerwheel::test;

namespace {

struct Wheel {
  Wheel(Milliseconds maximum, Milliseconds granularity,
        Ticks start = ManualTickProvider::kDefaultStart)
      : ticks(start), wheel(Options(maximum, granularity, &monitor), ticks), timer(ticks) {}

  static TimerWheelOptions Options(Milliseconds maximum, Milliseconds granularity,
                                   ITimerQueueMonitor* monitor) {
    TimerWheelOptions options;
    options.maximumTimeout = maximum;
    options.granularity = granularity;
    options.monitor = monitor;
    return options;
  }

  Ticks RoundUp(Ticks when) const {
    const Ticks g = wheel.GetGranularity();
    return (when + g - 1) / g * g;
  }

  std::size_t DispatchAt(Ticks when) {
    ticks.SetTime(when);
    return wheel.HandleTimeouts();
  }

  void RequireNoLeak() {
    wheel.CheckInvariants();
    REQUIRE(monitor.LiveTimers() == 0);
  }

  ManualTickProvider ticks;
  CountingTimerQueueMonitor monitor;
  TimerWheel wheel;
  RecordingTimer timer;
};

}  // namespace

TEST_CASE("the wheel rounds each deadline up to the next slot boundary, never down", "[wheel]") {
  const Milliseconds granularity = GENERATE(1u, 2u, 10u, 15u, 16u, 100u);
  // Set times on, just before and just after a boundary; deadlines likewise.
  const Ticks boundary = 1'000'000'000ull / granularity * granularity + 100ull * granularity;
  const Ticks setAt = boundary + GENERATE(-1, 0, 1);
  const Milliseconds base = 20 * granularity;
  const Milliseconds timeout = base + static_cast<Milliseconds>(GENERATE(-1, 0, 1));
  CAPTURE(granularity, setAt, timeout);

  Wheel w(60'000, granularity, setAt);
  TimerHandle handle = w.wheel.CreateTimer();
  w.wheel.SetTimer(handle, w.timer, timeout, 1);
  const Ticks deadline = setAt + timeout;
  const Ticks expected = w.RoundUp(deadline);
  REQUIRE(expected >= deadline);
  REQUIRE(expected - deadline < granularity);
  CHECK(w.wheel.GetNextTimeout() == expected - setAt);

  w.DispatchAt(expected - 1);
  CHECK(w.timer.Count() == 0);
  w.DispatchAt(expected);
  REQUIRE(w.timer.Count() == 1);
  CHECK(w.timer.Firings()[0].at == expected);
  w.wheel.DestroyTimer(handle);
  w.RequireNoLeak();
}

TEST_CASE("timers in one slot fire in the order they were set", "[wheel]") {
  Wheel w(60'000, 100);
  std::vector<TimerHandle> handles;
  const Ticks slotStart = w.RoundUp(w.ticks.Now() + 1000);
  // Deadlines spread over one slot, set in the reverse of deadline order.
  for (UserData i = 0; i < 5; ++i) {
    handles.push_back(w.wheel.CreateTimer());
    const Ticks deadline = slotStart - 1 - 20 * i;
    w.wheel.SetTimer(handles.back(), w.timer, static_cast<Milliseconds>(deadline - w.ticks.Now()),
                     i);
  }
  w.DispatchAt(slotStart);
  CHECK(w.timer.UserDataInOrder() == std::vector<UserData>{0, 1, 2, 3, 4});
  for (TimerHandle& handle : handles) w.wheel.DestroyTimer(handle);
  w.RequireNoLeak();
}

TEST_CASE("a wheel that has not been dispatched still accepts every timeout up to its maximum",
          "[wheel]") {
  constexpr Milliseconds kMaximum = 60'000;
  Wheel w(kMaximum, 15, 0);  // t = 0, as in the classic failure case
  TimerHandle first = w.wheel.CreateTimer();
  TimerHandle second = w.wheel.CreateTimer();
  w.wheel.SetTimer(first, w.timer, kMaximum - 1000, 1);
  const Ticks firstAt = w.RoundUp(kMaximum - 1000);

  w.ticks.SetTime(kMaximum - 500);  // no dispatch since t = 0; `first` is overdue
  CHECK_NOTHROW(w.wheel.SetTimer(second, w.timer, kMaximum, 2));
  const Ticks secondAt = w.RoundUp(kMaximum - 500 + kMaximum);
  CHECK(w.wheel.GetNextTimeout() == 0);
  w.wheel.CheckInvariants();

  CHECK(w.wheel.HandleTimeouts() == 1);
  REQUIRE(w.timer.Count() == 1);
  CHECK(w.timer.Firings()[0].userData == 1);
  CHECK(firstAt <= kMaximum - 500);
  CHECK(w.wheel.GetNextTimeout() == secondAt - (kMaximum - 500));
  w.DispatchAt(secondAt - 1);
  CHECK(w.timer.Count() == 1);
  w.DispatchAt(secondAt);
  CHECK(w.timer.UserDataInOrder() == std::vector<UserData>{1, 2});
  w.wheel.DestroyTimer(first);
  w.wheel.DestroyTimer(second);
  w.RequireNoLeak();
}

TEST_CASE("GetNextTimeout never throws and is exact with a timer at exactly the maximum",
          "[wheel]") {
  Wheel w(60'000, 15);
  TimerHandle handle = w.wheel.CreateTimer();
  w.wheel.SetTimer(handle, w.timer, 60'000, 1);
  const Ticks fireAt = w.RoundUp(w.ticks.Now() + 60'000);
  for (Ticks now = w.ticks.Now(); now < fireAt; now += 1'234) {
    w.ticks.SetTime(now);
    CHECK(w.wheel.GetNextTimeout() == fireAt - now);
  }
  w.DispatchAt(fireAt);
  CHECK(w.timer.Count() == 1);
  w.wheel.DestroyTimer(handle);
  w.RequireNoLeak();
}

TEST_CASE("after a long gap everything due fires at the next dispatch, in order", "[wheel]") {
  constexpr Milliseconds kMaximum = 60'000;
  constexpr Milliseconds kGranularity = 15;
  const Ticks gap = GENERATE(Ticks{kMaximum}, Ticks{kMaximum + kGranularity},
                             Ticks{10ull * kMaximum}, Ticks{49ull * 24 * 3600 * 1000});
  CAPTURE(gap);
  Wheel w(kMaximum, kGranularity);
  const Ticks start = w.ticks.Now();

  // Timers set at different times during the gap, none dispatched: deadlines over more than one
  // revolution of the ring.
  std::vector<TimerHandle> handles;
  std::vector<UserData> expectedOrder;
  const Ticks step = gap / 8;
  for (UserData i = 0; i < 8; ++i) {
    w.ticks.SetTime(start + i * step);
    handles.push_back(w.wheel.CreateTimer());
    w.wheel.SetTimer(handles.back(), w.timer, static_cast<Milliseconds>(kMaximum - 100 * i), i);
  }
  // Order by firing time (deadline rounded up), ties in set order.
  std::vector<std::pair<Ticks, UserData>> byTime;
  for (UserData i = 0; i < 8; ++i) {
    byTime.push_back({w.RoundUp(start + i * step + kMaximum - 100 * i), i});
  }
  std::stable_sort(byTime.begin(), byTime.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& entry : byTime) expectedOrder.push_back(entry.second);

  const Ticks end = start + gap + 2 * kMaximum;  // everything is due by then
  w.ticks.SetTime(end);
  CHECK(w.wheel.GetNextTimeout() == 0);
  CHECK(w.wheel.HandleTimeouts() == 8);
  CHECK(w.timer.UserDataInOrder() == expectedOrder);
  CHECK(w.wheel.GetNextTimeout() == kInfinite);

  // The wheel carries on normally after the gap.
  w.wheel.SetTimer(handles[0], w.timer, 100, 100);
  w.DispatchAt(w.RoundUp(end + 100));
  CHECK(w.timer.Count() == 9);
  for (TimerHandle& handle : handles) w.wheel.DestroyTimer(handle);
  w.RequireNoLeak();
}

TEST_CASE("timers stay pending across the 32-bit wrap and a long gap in dispatch", "[wheel]") {
  ManualWrappingTickSource source(0xFFFFFFFFu - 30'000u);
  WrappingTickAdapter ticks(source);
  CountingTimerQueueMonitor monitor;
  TimerWheelOptions options;
  options.monitor = &monitor;
  TimerWheel wheel(options, ticks);
  RecordingTimer timer(ticks);
  std::vector<TimerHandle> handles;
  for (UserData i = 0; i < 4; ++i) {
    handles.push_back(wheel.CreateTimer());
    wheel.SetTimer(handles.back(), timer, static_cast<Milliseconds>(20'000 + 10'000 * i), i);
  }
  source.Advance(25'000);  // before the wrap: timer 0 is due
  CHECK(wheel.HandleTimeouts() == 1);
  source.Advance(45'000);  // across the wrap, and past timers 1..3
  CHECK(wheel.GetNextTimeout() == 0);
  CHECK(wheel.HandleTimeouts() == 3);
  CHECK(timer.UserDataInOrder() == std::vector<UserData>{0, 1, 2, 3});
  for (TimerHandle& handle : handles) wheel.DestroyTimer(handle);
  wheel.CheckInvariants();
  CHECK(monitor.LiveTimers() == 0);
}

// The in-place re-arm compares ring indexes alone, which needs the cursor's own ring index empty:
// the ring has a slot more than the furthest deadline reaches (ceil((M + L) / g) + 1 ahead).
TEST_CASE("the furthest deadline stays clear of the cursor's own ring index", "[wheel]") {
  const Milliseconds granularity = GENERATE(1u, 7u, 15u);
  const Milliseconds maximum = 15 * granularity;  // 16 slots ahead, set just after a boundary
  Wheel w(maximum, granularity);
  TimerHandle handle = w.wheel.CreateTimer();
  for (Ticks phase = 0; phase < granularity + 1; ++phase) {
    // `phase` ms past the next slot boundary.
    const Ticks now = w.RoundUp(w.ticks.GetTickCount() + 1) + phase;
    w.ticks.SetTime(now);
    w.wheel.SetTimer(handle, w.timer, maximum, phase);
    w.wheel.CheckInvariants();                    // throws if a timer sits at cursor + N
    w.wheel.SetTimer(handle, w.timer, 0, phase);  // due at once: fires now, not N slots later
    CHECK(w.DispatchAt(w.RoundUp(now)) == 1);
  }
  w.wheel.DestroyTimer(handle);
  w.RequireNoLeak();
}

TEST_CASE("wheel options are validated", "[wheel]") {
  ManualTickProvider ticks;
  auto make = [&](Milliseconds maximum, Milliseconds granularity) {
    TimerWheelOptions options;
    options.maximumTimeout = maximum;
    options.granularity = granularity;
    return TimerWheel(options, ticks).GetMaximumTimeout();
  };
  CHECK_THROWS_AS(make(60'000, 0), std::invalid_argument);
  CHECK_THROWS_AS(make(0, 15), std::invalid_argument);
  CHECK_THROWS_AS(make(kInfinite - 1, 1), std::invalid_argument);    // 2^32 slots
  CHECK_THROWS_AS(make(kInfinite - 20, 15), std::invalid_argument);  // no room for M + 2g
  CHECK_THROWS_AS(make((1u << 24) - 1, 1), std::invalid_argument);   // 2^24 + 1 slots
  CHECK(make(60'000, 15) == 60'000);
  CHECK(make(1, 1) == 1);
  CHECK(TimerWheel(ticks).GetGranularity() == 15);
}

TEST_CASE("the reciprocal divides rounding up exactly, with no case for a divisor of 1",
          "[wheel][reciprocal]") {
  const std::uint64_t kTop = 0xFFFFFFFFu;
  for (const std::uint64_t divisor :
       {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{7}, std::uint64_t{15},
        std::uint64_t{16}, std::uint64_t{1000}, std::uint64_t{65'537}, kTop / 2, kTop}) {
    CAPTURE(divisor);
    const timerwheel::detail::Reciprocal reciprocal(static_cast<std::uint32_t>(divisor));
    const std::uint64_t largest = kTop - (divisor - 1);  // n + d - 1 must fit in 32 bits
    auto check = [&](std::uint64_t n) {
      CAPTURE(n);
      REQUIRE(reciprocal.DivideRoundingUp(static_cast<std::uint32_t>(n)) ==
              (n + divisor - 1) / divisor);
    };
    for (std::uint64_t n = 0; n < 5000 && n <= largest; ++n) check(n);
    for (std::uint64_t n = largest - (largest < 5000 ? largest : 5000); n <= largest; ++n) check(n);
    for (std::uint64_t k = 1; k * divisor <= largest && k < 100'000; k = k * 3 + 1) {
      check(k * divisor - 1);
      check(k * divisor);
      check(k * divisor + 1 <= largest ? k * divisor + 1 : largest);
    }
  }
}

TEST_CASE("a callback that calls HandleTimeout itself runs each expiry once", "[wheel]") {
  // The dispatch loop keeps its place in a local between callbacks; a nested HandleTimeout moves
  // the batch's position, which the outer loop must take up again rather than rerun entries.
  Wheel w(60'000, 15);
  std::vector<TimerHandle> handles;
  for (UserData i = 0; i < 4; ++i) {
    handles.push_back(w.wheel.CreateTimer());
    w.wheel.SetTimer(handles.back(), w.timer, 100, i);
  }
  bool nested = false;
  w.timer.OnFire([&](UserData userData) {
    if (userData == 0 && !nested) {
      nested = true;
      CHECK(w.wheel.HandleTimeout(2) == 2);  // runs 1 and 2 from inside 0's callback
    }
  });
  w.ticks.SetTime(w.RoundUp(w.ticks.Now() + 100));
  REQUIRE(w.wheel.BeginTimeoutHandling());
  const std::size_t handledOutside = w.wheel.HandleTimeout();
  w.wheel.EndTimeoutHandling();
  CHECK(handledOutside == 2);  // 0 and 3
  CHECK(w.timer.UserDataInOrder() == std::vector<UserData>{0, 1, 2, 3});
  for (TimerHandle& handle : handles) w.wheel.DestroyTimer(handle);
  w.RequireNoLeak();
}
