// No driver fires a timer before set time + timeout, measured with std::chrono::steady_clock at
// sub-millisecond resolution, on the default system clock, the coarse clock and the 32-bit
// wrapping counter through its adapter (under Wine in the MinGW build).
#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>

#include "Support/DriverTraits.h"
#include "Support/FunctionTimer.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/SystemTickProvider.h"
#include "TimerQueue/WrappingTickAdapter.h"

using namespace timerwheel;
using namespace timerwheel::test;

namespace {

using Clock = std::chrono::steady_clock;

// Tolerance: none for earliness. Lateness is only reported: on a loaded machine it can be large.
// The timeouts cover every sub-millisecond phase of the set relative to the clock's millisecond
// floor, which is what made a floored clock fire up to 1 ms early before queues added a tick.
constexpr int kTimers = 40;

}  // namespace

TEMPLATE_TEST_CASE("no driver fires a timer before set time plus timeout by the steady clock",
                   "[driver][never-early][.][realtime]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  static const SystemWrappingTickSource wrappingSource;
  static const WrappingTickAdapter wrapping(wrappingSource);
  const int clock = GENERATE(0, 1, 2);
  const ITickProvider& ticks =
      clock == 0   ? static_cast<const ITickProvider&>(SystemTickProvider::Instance())
      : clock == 1 ? static_cast<const ITickProvider&>(CoarseTickProvider::Instance())
                   : wrapping;
  CAPTURE(clock == 0 ? "system" : clock == 1 ? "coarse" : "32-bit wrapping");
  CountingTimerQueueMonitor monitor;
  auto queue = TestType::QueueTraits::Make(ticks, &monitor);
  std::array<Clock::time_point, kTimers> setAt{};
  std::array<Clock::time_point, kTimers> firedAt{};
  std::array<Milliseconds, kTimers> timeout{};
  std::atomic<int> fired{0};
  std::promise<void> allFired;
  FunctionTimer timer([&](UserData index) {
    firedAt[index] = Clock::now();
    if (++fired == kTimers) allFired.set_value();
  });
  {
    typename TestType::Harness harness(*queue, &monitor, {});
    for (int i = 0; i < kTimers; ++i) {
      timeout[i] = static_cast<Milliseconds>(1 + i % 20);
      setAt[i] = Clock::now();  // before the queue reads its clock: the strictest measure
      harness.Queue().SetOneShotTimer(timer, timeout[i], static_cast<UserData>(i));
      // Spread the sets over the millisecond so that their fractions differ.
      const auto spin = Clock::now() + std::chrono::microseconds(97);
      while (Clock::now() < spin) {
      }
    }
    REQUIRE(allFired.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    REQUIRE(harness.Shutdown(std::chrono::seconds(20)));
  }
  using Micros = std::chrono::duration<double, std::micro>;
  double worstEarly = 0;
  double worstLate = 0;
  for (int i = 0; i < kTimers; ++i) {
    const double elapsed = Micros(firedAt[i] - setAt[i]).count();
    const double wanted = timeout[i] * 1000.0;
    if (elapsed < wanted) worstEarly = std::max(worstEarly, wanted - elapsed);
    worstLate = std::max(worstLate, elapsed - wanted);
  }
  INFO("worst lateness " << worstLate << " us (not judged); worst earliness " << worstEarly
                         << " us");
  CHECK(worstEarly == 0);
  CHECK(monitor.LiveTimers() == 0);
}
