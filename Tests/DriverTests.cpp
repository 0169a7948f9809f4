// The drivers, over every implementation and dispatch policy, in real time. Tests wait on
// futures with a generous timeout; nothing sleeps to synchronise.
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Support/DriverFailureFixture.h"
#include "Support/DriverTraits.h"
#include "Support/FunctionTimer.h"
#include "Support/ManualTickProvider.h"
#include "Support/WaitableCount.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/SystemTickProvider.h"

using namespace timerwheel;
using namespace timerwheel::test;
using namespace std::chrono_literals;

// Threads share handles through atomics (below); that must not need libatomic with any compiler.
static_assert(std::atomic<TimerHandle>::is_always_lock_free, "TimerHandle must be 8-byte aligned");

namespace {

template <class Traits>
struct DriverFixture {
  CountingTimerQueueMonitor monitor;
  std::unique_ptr<typename Traits::QueueTraits::Queue> queue =
      Traits::QueueTraits::Make(SystemTickProvider::Instance(), &monitor);
  std::mutex errorsMutex;
  std::vector<std::string> errors;
  std::function<void()> onErrorHook;  // runs inside the error handler, if set
  typename Traits::Harness harness{*queue, &monitor, [this](std::exception_ptr error) {
                                     if (onErrorHook) onErrorHook();
                                     std::lock_guard<std::mutex> lock(errorsMutex);
                                     try {
                                       std::rethrow_exception(error);
                                     } catch (const std::exception& e) {
                                       errors.emplace_back(e.what());
                                     }
                                   }};
  ITimerQueue& driver = harness.Queue();

  void ShutdownAndRequireNoLeak() {
    REQUIRE(harness.Shutdown(kGenerousWait));
    queue->CheckInvariants();
    REQUIRE(monitor.LiveTimers() == 0);
  }
};

}  // namespace

TEMPLATE_TEST_CASE("a driver fires timers on its own thread", "[.][realtime][driver]",
                   TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  std::promise<std::thread::id> fired;
  FunctionTimer timer([&](UserData userData) {
    CHECK(userData == 7);
    fired.set_value(std::this_thread::get_id());
  });
  TimerHandle handle = f.driver.CreateTimer();
  f.driver.SetTimer(handle, timer, 20, 7);
  auto future = fired.get_future();
  REQUIRE(Ready(future));
  CHECK(future.get() != std::this_thread::get_id());
  CHECK_FALSE(f.driver.TimerIsSet(handle));
  f.driver.DestroyTimer(handle);
  f.ShutdownAndRequireNoLeak();
}

TEMPLATE_TEST_CASE("driver callbacks may call any method of the driver", "[.][realtime][driver]",
                   TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  std::promise<void> done;
  TimerHandle self = f.driver.CreateTimer();
  TimerHandle other = f.driver.CreateTimer();
  FunctionTimer never([](UserData) { FAIL("cancelled timer fired"); });
  f.driver.SetTimer(other, never, 60'000, 0);
  int firings = 0;
  FunctionTimer oneShot([](UserData) {});
  FunctionTimer timer([&](UserData) {
    ++firings;
    CHECK_FALSE(f.driver.TimerIsSet(self));
    if (firings < 20) {
      CHECK_FALSE(f.driver.SetTimer(self, timer, 1, 0));
      f.driver.SetOneShotTimer(oneShot, 0, 0);
      TimerHandle scratch = f.driver.CreateTimer();
      f.driver.DestroyTimer(scratch);
    } else {
      CHECK(f.driver.CancelTimer(other));
      CHECK_FALSE(f.driver.DestroyTimer(self));
      done.set_value();
    }
  });
  f.driver.SetTimer(self, timer, 1, 0);
  auto future = done.get_future();
  REQUIRE(Ready(future));
  CHECK(firings == 20);
  f.driver.DestroyTimer(other);
  // Let the last one-shot fire: a timer set after it fires after it.
  std::promise<void> last;
  FunctionTimer lastTimer([&](UserData) { last.set_value(); });
  f.driver.SetOneShotTimer(lastTimer, 20, 0);
  auto lastFuture = last.get_future();
  REQUIRE(Ready(lastFuture));
  f.ShutdownAndRequireNoLeak();
}

TEMPLATE_TEST_CASE("sets that do not bring the next deadline forward do not wake the thread",
                   "[.][realtime][driver]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  FunctionTimer never([](UserData) { FAIL("a long timer fired"); });
  TimerHandle first = f.driver.CreateTimer();
  f.driver.SetTimer(first, never, 50'000, 0);

  // Synchronise with the thread: once this callback has run, the thread has seen `first`.
  std::promise<void> synced;
  FunctionTimer sync([&](UserData) { synced.set_value(); });
  f.driver.SetOneShotTimer(sync, 0, 0);
  auto syncFuture = synced.get_future();
  REQUIRE(Ready(syncFuture));

  std::vector<TimerHandle> later(100);
  for (TimerHandle& handle : later) handle = f.driver.CreateTimer();
  const auto wakeUpsBefore = f.monitor.WakeUps();
  for (int i = 0; i < 10'000; ++i) {
    f.driver.SetTimer(later[i % later.size()], never, 55'000 + static_cast<Milliseconds>(i % 1000),
                      0);
  }
  CHECK(f.monitor.WakeUps() == wakeUpsBefore);

  // A sooner timer does wake it, and fires.
  std::promise<void> soon;
  FunctionTimer soonTimer([&](UserData) { soon.set_value(); });
  f.driver.SetOneShotTimer(soonTimer, 10, 0);
  auto soonFuture = soon.get_future();
  REQUIRE(Ready(soonFuture));
  CHECK(f.monitor.WakeUps() > wakeUpsBefore);

  for (TimerHandle& handle : later) f.driver.DestroyTimer(handle);
  f.driver.DestroyTimer(first);
  f.ShutdownAndRequireNoLeak();
}

TEMPLATE_TEST_CASE("a throwing callback is reported and dispatch carries on",
                   "[.][realtime][driver]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  FunctionTimer thrower([](UserData) { throw std::runtime_error("callback failed"); });
  std::promise<void> after;
  FunctionTimer afterTimer([&](UserData) { after.set_value(); });
  f.driver.SetOneShotTimer(thrower, 5, 0);
  f.driver.SetOneShotTimer(thrower, 5, 0);
  f.driver.SetOneShotTimer(afterTimer, 40, 0);
  auto future = after.get_future();
  REQUIRE(Ready(future));
  {
    std::lock_guard<std::mutex> lock(f.errorsMutex);
    CHECK(f.errors == std::vector<std::string>{"callback failed", "callback failed"});
  }
  f.ShutdownAndRequireNoLeak();
}

TEMPLATE_TEST_CASE("shutdown is prompt and pending timers do not fire", "[.][realtime][driver]",
                   TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  std::atomic<int> fired{0};
  FunctionTimer timer([&](UserData) { ++fired; });
  TimerHandle handle = f.driver.CreateTimer();
  f.driver.SetTimer(handle, timer, 30'000, 0);
  f.driver.SetOneShotTimer(timer, 30'000, 0);
  std::size_t oneShotsLeft = 1;  // never fired: freed with the queue

  SECTION("from another thread") { REQUIRE(f.harness.Shutdown(kGenerousWait)); }
  // milliseconds::max(), "as long as it takes", overflowed now + timeout: undefined behaviour,
  // which returned false at once.
  SECTION("waiting without a limit") {
    REQUIRE(f.harness.Shutdown(std::chrono::milliseconds::max()));
  }
  SECTION("from inside a callback") {
    std::promise<void> shutdownCalled;
    FunctionTimer stopper([&](UserData) {
      f.harness.BeginShutdown();
      shutdownCalled.set_value();
    });
    f.driver.SetOneShotTimer(stopper, 1, 0);
    auto future = shutdownCalled.get_future();
    REQUIRE(Ready(future));
    REQUIRE(f.harness.Shutdown(kGenerousWait));
  }
  // The rest of the batch behind the callback that shuts down does not run, whatever the policy
  // (under WithLockHeld the whole batch used to run under the lock; IocpTimerQueue ran up to
  // callbacksPerPacket of it).
  SECTION("from inside a callback, with more due behind it") {
    std::promise<void> shutdownCalled;
    FunctionTimer stopper([&](UserData) {
      f.harness.BeginShutdown();
      shutdownCalled.set_value();
    });
    f.driver.SetOneShotTimer(stopper, 1, 0);  // first: FIFO among equal deadlines and in a slot
    for (int i = 0; i < 50; ++i) f.driver.SetOneShotTimer(timer, 1, 0);
    oneShotsLeft += 50;
    auto future = shutdownCalled.get_future();
    REQUIRE(Ready(future));
    REQUIRE(f.harness.Shutdown(kGenerousWait));
  }
  CHECK(fired == 0);
  CHECK(f.driver.TimerIsSet(handle));  // still pending in the queue, never fired
  f.driver.DestroyTimer(handle);
  CHECK(f.monitor.LiveTimers() == oneShotsLeft);  // the one-shots: freed with the queue
  f.queue.reset();
  CHECK(f.monitor.LiveTimers() == 0);
}

// "After WaitForShutdownToComplete returns true no callback will run": so without a shutdown it
// cannot return true. AsioTimerQueue's returned true at once whenever no dispatch was running.
TEMPLATE_TEST_CASE("waiting for a shutdown that was not begun returns false, and timers still fire",
                   "[.][realtime][driver]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  std::promise<void> firedPromise;
  FunctionTimer timer([&](UserData) { firedPromise.set_value(); });
  f.driver.SetOneShotTimer(timer, 20, 0);
  CHECK_FALSE(f.harness.WaitForShutdownToComplete(std::chrono::milliseconds(1)));
  auto fired = firedPromise.get_future();
  REQUIRE(Ready(fired));
  f.ShutdownAndRequireNoLeak();
}

TEMPLATE_TEST_CASE("threads setting, cancelling and destroying shared timers lose no arming",
                   "[.][realtime][driver][stress]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  constexpr std::size_t kTimers = 64;
  constexpr int kWorkers = 2;
  constexpr int kOperationsPerWorker = 20'000;
  std::array<std::atomic<TimerHandle>, kTimers> handles;
  for (auto& handle : handles) handle.store(f.driver.CreateTimer());

  // Callbacks re-arm their own timer now and then (its handle may have been replaced meanwhile).
  FunctionTimer timer([&](UserData index) {
    if (index % 4 == 0) {
      try {
        f.driver.SetTimer(handles[index].load(), timer, 2, index);
      } catch (const InvalidTimerHandle&) {
      }
    }
  });

  auto work = [&](int worker) {
    std::mt19937 random(static_cast<unsigned>(worker + 1));
    for (int i = 0; i < kOperationsPerWorker; ++i) {
      const std::size_t index = random() % kTimers;
      const TimerHandle handle = handles[index].load();
      try {
        switch (random() % 8) {
          case 0:
          case 1:
          case 2:
            f.driver.SetTimer(handle, timer, random() % 5, index);
            break;
          case 3:
            f.driver.UpdateTimer(handle, timer, random() % 5, index);
            break;
          case 4:
          case 5:
            f.driver.CancelTimer(handle);
            break;
          case 6:
            f.driver.TimerIsSet(handle);
            break;
          default: {
            // Replace the timer: only one thread wins the exchange and destroys the old one.
            TimerHandle fresh = f.driver.CreateTimer();
            TimerHandle expected = handle;
            if (handles[index].compare_exchange_strong(expected, fresh)) {
              f.driver.DestroyTimer(expected);
            } else {
              f.driver.DestroyTimer(fresh);
            }
          }
        }
      } catch (const InvalidTimerHandle&) {
        // Another thread destroyed this handle first: allowed, and changes nothing.
      }
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back(work, w);
  for (std::thread& worker : workers) worker.join();

  // Quiesce: stop the self-re-arming, cancel everything, and wait for a sentinel set after all
  // of that, so that every expiry detached earlier has been dispatched.
  for (std::size_t i = 0; i < kTimers; ++i) {
    TimerHandle handle = handles[i].load();
    handles[i].store(TimerHandle{});  // callbacks that still run cannot re-arm it
    f.driver.CancelTimer(handle);
    f.driver.DestroyTimer(handle);
  }
  std::promise<void> sentinel;
  FunctionTimer sentinelTimer([&](UserData) { sentinel.set_value(); });
  f.driver.SetOneShotTimer(sentinelTimer, 0, 0);
  auto future = sentinel.get_future();
  REQUIRE(Ready(future));
  REQUIRE(f.harness.Shutdown(kGenerousWait));

  // None is still pending.
  const auto& m = f.monitor;
  CheckArmingsBalance(m);
  CHECK(m.Fired() > 0);
  f.queue->CheckInvariants();
  CHECK(m.LiveTimers() == 0);
}

TEMPLATE_TEST_CASE("no callback runs after shutdown completes, with expiries in flight",
                   "[.][realtime][driver]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  std::atomic<bool> shutdownReturned{false};
  std::atomic<int> fired{0};
  std::atomic<int> firedAfterShutdown{0};
  std::promise<void> firstFired;
  std::atomic<bool> firstSignalled{false};
  FunctionTimer timer([&](UserData) {
    if (shutdownReturned.load()) ++firedAfterShutdown;
    ++fired;
    if (!firstSignalled.exchange(true)) firstFired.set_value();
  });
  constexpr int kTimers = 2000;
  {
    auto f = std::make_unique<DriverFixture<TestType>>();
    for (int i = 0; i < kTimers; ++i)
      f->driver.SetOneShotTimer(timer, static_cast<Milliseconds>(i % 3), 0);
    auto future = firstFired.get_future();
    REQUIRE(Ready(future));
    // Dispatch is under way (for IOCP: a packet is in the port or on a worker) when it stops.
    REQUIRE(f->harness.Shutdown(kGenerousWait));
    shutdownReturned.store(true);
    const int firedAtShutdown = fired.load();
    CHECK(firedAtShutdown >= 1);
    f.reset();  // joins every thread the driver and the harness ran; frees the unfired one-shots
    CHECK(fired.load() == firedAtShutdown);
  }
  CHECK(firedAfterShutdown.load() == 0);
}

TEMPLATE_TEST_CASE("the error handler runs without the driver's lock", "[.][realtime][driver]",
                   TIMERWHEEL_ALL_DRIVER_TRAITS) {
  DriverFixture<TestType> f;
  // Another thread calls the driver from inside the handler: if the handler held the lock, that
  // call could not finish until the handler returned.
  // The future lives outside the handler: its destructor waits for the call, which (were the
  // lock held) could only finish after the handler returned.
  std::atomic<bool> otherThreadGotIn{false};
  std::future<Milliseconds> call;
  f.onErrorHook = [&] {
    call = std::async(std::launch::async, [&] { return f.driver.GetMaximumTimeout(); });
    otherThreadGotIn = call.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  };
  FunctionTimer thrower([](UserData) { throw std::runtime_error("callback failed"); });
  std::promise<void> after;
  FunctionTimer afterTimer([&](UserData) { after.set_value(); });
  f.driver.SetOneShotTimer(thrower, 1, 0);
  f.driver.SetOneShotTimer(afterTimer, 30, 0);
  auto future = after.get_future();
  REQUIRE(Ready(future));
  CHECK(otherThreadGotIn);
  f.ShutdownAndRequireNoLeak();
}

// A set that finds an expiry already due (the queue's clock passed it while the steady_timer's
// wait was still far off: on a busy server, a datagram in the first moments of a tick) has it
// dispatched by the io_context's next handler, not at the wait's end. Here the wait is a minute of
// real time and the clock is the test's, so only that dispatch can fire the timer.
TEST_CASE("the Asio driver dispatches an expiry that a set finds already due at once", "[driver]") {
  ManualTickProvider ticks;
  CountingTimerQueueMonitor monitor;
  auto queue = WheelTraits::Make(ticks, &monitor);
  boost::asio::io_context io;
  AsioTimerQueueOptions options;
  options.monitor = &monitor;
  AsioTimerQueue driver(io, *queue, options);
  std::vector<UserData> fired;
  FunctionTimer timer([&](UserData data) { fired.push_back(data); });
  TimerHandle due = driver.CreateTimer();
  TimerHandle later = driver.CreateTimer();
  driver.SetTimer(due, timer, 59'000, 1);
  io.poll();
  CHECK(fired.empty());

  ticks.Advance(60'000);
  const auto wakeUpsBefore = monitor.WakeUps();
  driver.SetTimer(later, timer, 30'000, 2);  // finds `due` due
  // Sets until the dispatch runs (a burst of datagrams) schedule no second one: the poll runs two
  // handlers, the dispatch and the completion of the wait that its aim cancelled.
  for (Milliseconds timeout = 30'001; timeout <= 30'100; ++timeout) {
    driver.SetTimer(later, timer, timeout, 2);
  }
  CHECK(io.poll() == 2);
  CHECK(fired == std::vector<UserData>{1});
  CHECK(monitor.WakeUps() == wakeUpsBefore + 1);
  CHECK(driver.TimerIsSet(later));

  driver.DestroyTimer(due);
  driver.DestroyTimer(later);
  driver.BeginShutdown();
  io.poll();
  CHECK(driver.WaitForShutdownToComplete(std::chrono::milliseconds(0)));
  CHECK(monitor.LiveTimers() == 0);
}

TEST_CASE("the threaded driver refuses a null queue to own", "[driver]") {
  CHECK_THROWS_AS(ThreadedTimerQueue(std::unique_ptr<IManageTimerQueue>{}), std::invalid_argument);
}
