// A driver over a queue, reporting to a monitor and an error log, for the driver failure tests.
#pragma once

#include <exception>
#include <future>
#include <memory>
#include <type_traits>

#include "Support/DriverTraits.h"
#include "Support/ErrorLog.h"
#include "Support/FunctionTimer.h"
#include "Support/WaitableCount.h"
#include "TimerQueue/CallbackErrorHandler.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/DispatchPolicy.h"
#include "TimerQueue/SystemTickProvider.h"

namespace timerwheel::test {

// The driver object behind a harness (HarnessBase::Queue() is the driver itself).
template <class Driver>
Driver& DriverOf(HarnessBase<Driver>& harness) {
  return static_cast<Driver&>(harness.Queue());
}

// The traits' dispatch policy; the IOCP driver always runs callbacks without its lock.
template <class Traits, class = void>
struct PolicyOf {
  static constexpr DispatchPolicy value = DispatchPolicy::WithoutLock;
};
template <class Traits>
struct PolicyOf<Traits, std::void_t<decltype(Traits::kPolicy)>> {
  static constexpr DispatchPolicy value = Traits::kPolicy;
};

// A queue and the driver running it, reporting to a monitor and an error log that outlive them.
template <class Traits>
struct DriverUnderTest {
  DriverUnderTest(const ITickProvider& ticks, CountingTimerQueueMonitor& monitor, ErrorLog& errors)
      : queue(Traits::QueueTraits::Make(ticks, &monitor)),
        harness(*queue, &monitor, [&errors](std::exception_ptr error) { errors(error); }) {}

  std::unique_ptr<typename Traits::QueueTraits::Queue> queue;
  typename Traits::Harness harness;  // destroyed before the queue
  ITimerQueue& driver = harness.Queue();
};

template <class Traits>
struct FailureFixture {
  explicit FailureFixture(const ITickProvider& ticks = SystemTickProvider::Instance())
      : dut(std::make_unique<DriverUnderTest<Traits>>(ticks, monitor, errors)) {}

  CountingTimerQueueMonitor monitor;
  ErrorLog errors;
  std::unique_ptr<DriverUnderTest<Traits>> dut;
  ITimerQueue& driver = dut->driver;

  bool Shutdown() { return dut->harness.Shutdown(kGenerousWait); }
};

// Every arming ended exactly one way: fired, cancelled, replaced by a set or update, or destroyed
// while pending (the stress test in DriverTests.cpp checks the same). Call once nothing is pending.
inline void CheckArmingsBalance(const CountingTimerQueueMonitor& m) {
  const auto armings = m.Set() + m.Updated() + m.OneShotCreated();
  const auto endings = m.Fired() + m.Cancelled() + m.SetWhilePending() + m.UpdatedWhilePending() +
                       m.DestroyedWhilePending();
  CAPTURE(m.Set(), m.Updated(), m.OneShotCreated(), m.Fired(), m.Cancelled(), m.SetWhilePending(),
          m.UpdatedWhilePending(), m.DestroyedWhilePending());
  CHECK(armings == endings);
}

// Waits until a one-shot set now has fired: every expiry detached before it has been dispatched
// (and every error reported) by then, as long as it is set after, with a later deadline than,
// everything the test waits for.
inline bool FireSentinel(ITimerQueue& driver, Milliseconds timeout) {
  std::promise<void> fired;
  FunctionTimer sentinel([&](UserData) { fired.set_value(); });
  driver.SetOneShotTimer(sentinel, timeout, 0);
  auto future = fired.get_future();
  return Ready(future);
}

}  // namespace timerwheel::test
