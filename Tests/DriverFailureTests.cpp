// The drivers when timers misbehave: callbacks that throw, block, or drop the last reference to
// their driver; clocks that jump forward by days or wrap; shutdown while callbacks run and other
// threads keep setting timers. Every driver, over every implementation and dispatch policy.
// Nothing sleeps to synchronise: tests wait on futures and counts with a generous timeout, and
// where the time matters it is a manual clock that the test moves.
#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "Support/AllocationCounter.h"
#include "Support/DriverFailureFixture.h"
#include "Support/DriverTraits.h"
#include "Support/ErrorLog.h"
#include "Support/FiringLog.h"
#include "Support/FunctionTimer.h"
#include "Support/Heartbeat.h"
#include "Support/ManualTickProvider.h"
#include "Support/WaitableCount.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/InvalidTimerHandle.h"
#include "TimerQueue/SystemTickProvider.h"
#include "TimerQueue/WrappingTickAdapter.h"

#ifndef _WIN32
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#endif

using namespace timerwheel;
using namespace timerwheel::test;
using namespace std::chrono_literals;

namespace {

constexpr Ticks kDay = 24 * 60 * 60 * 1000;

}  // namespace

// 1. Throwing callbacks.
TEMPLATE_TEST_CASE(
    "callbacks that throw are each reported and every other timer fires exactly once",
    "[.][realtime][driver][failure]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  FailureFixture<TestType> f;
  constexpr std::size_t kTimers = 1200;
  constexpr std::size_t kHandles = 800;  // the others are one-shots
  auto throwsStd = [](std::size_t i) { return i % 10 == 0; };
  auto throwsInt = [](std::size_t i) { return i % 10 == 5; };

  std::vector<std::atomic<int>> firings(kTimers);
  WaitableCount ran;
  FunctionTimer timer([&](UserData i) {
    firings[i].fetch_add(1);
    ran.Add();
    if (throwsStd(i)) throw std::runtime_error("timer " + std::to_string(i) + " failed");
    if (throwsInt(i)) throw static_cast<int>(i);
  });
  std::vector<TimerHandle> handles(kHandles);
  for (TimerHandle& handle : handles) handle = f.driver.CreateTimer();

  // Two threads set them (a timer of each kind per index parity), while earlier ones fire.
  auto set = [&](std::size_t parity) {
    std::mt19937 random(static_cast<unsigned>(parity + 1));
    for (std::size_t i = parity; i < kTimers; i += 2) {
      const Milliseconds timeout = random() % 30;
      if (i < kHandles) {
        f.driver.SetTimer(handles[i], timer, timeout, i);
      } else {
        f.driver.SetOneShotTimer(timer, timeout, i);
      }
    }
  };
  std::thread other(set, 1);
  set(0);
  other.join();

  std::vector<std::string> expectedErrors;
  for (std::size_t i = 0; i < kTimers; ++i) {
    if (throwsStd(i)) expectedErrors.push_back("timer " + std::to_string(i) + " failed");
    if (throwsInt(i)) expectedErrors.push_back("int " + std::to_string(i));
  }
  REQUIRE(ran.WaitFor(kTimers));
  REQUIRE(f.errors.WaitFor(expectedErrors.size()));
  REQUIRE(FireSentinel(f.driver, 0));

  std::size_t notOnce = 0;
  std::string firstNotOnce;
  for (std::size_t i = 0; i < kTimers; ++i) {
    if (firings[i].load() != 1 && notOnce++ == 0) {
      firstNotOnce =
          "timer " + std::to_string(i) + " fired " + std::to_string(firings[i].load()) + " times";
    }
  }
  INFO(firstNotOnce);
  CHECK(notOnce == 0);
  CHECK(ran.Get() == kTimers);
  std::vector<std::string> errors = f.errors.Messages();
  std::sort(errors.begin(), errors.end());
  std::sort(expectedErrors.begin(), expectedErrors.end());
  CHECK(errors == expectedErrors);

  for (TimerHandle& handle : handles) CHECK_FALSE(f.driver.DestroyTimer(handle));
  REQUIRE(f.Shutdown());
  CHECK(f.monitor.Fired() == kTimers + 1);
  CheckArmingsBalance(f.monitor);
  f.dut->queue->CheckInvariants();
  CHECK(f.monitor.LiveTimers() == 0);
}

// 2. A callback that blocks (on a latch standing for seconds of work).
TEMPLATE_TEST_CASE(
    "a blocked callback delays the others; once it returns every due timer fires once",
    "[.][realtime][driver][failure]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  FailureFixture<TestType> f;
  const ITickProvider& clock = SystemTickProvider::Instance();
  constexpr bool kSetsWaitForCallbacks = PolicyOf<TestType>::value == DispatchPolicy::WithLockHeld;

  std::promise<void> blocking;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> blockerReturned{false};
  std::atomic<bool> blockerTimedOut{false};

  struct Firing {
    UserData arming;
    Ticks at;
    bool afterBlocker;
  };
  std::mutex firedMutex;
  std::vector<Firing> fired;
  WaitableCount firedCount;
  FunctionTimer recorder([&](UserData arming) {
    const bool afterBlocker = blockerReturned.load();
    const Ticks at = clock.GetTickCount();
    {
      std::lock_guard<std::mutex> lock(firedMutex);
      fired.push_back({arming, at, afterBlocker});
    }
    firedCount.Add();
  });

  std::atomic<Ticks> blockedAt{0};
  // Before it blocks, the callback sets timers due a few ms later, so while it blocks under any
  // policy (no other thread can set any under WithLockHeld).
  constexpr UserData kEarlyArmings = 50;
  std::vector<std::pair<UserData, Ticks>> earlyDeadlines;  // set before `blocking`, read after
  FunctionTimer blocker([&](UserData) {
    for (UserData arming = 1; arming <= kEarlyArmings; ++arming) {
      const Milliseconds timeout = 5 + arming % 10;
      f.driver.SetOneShotTimer(recorder, timeout, arming);
      earlyDeadlines.emplace_back(arming, clock.GetTickCount() + timeout);
    }
    blockedAt = clock.GetTickCount();
    blocking.set_value();
    if (released.wait_for(kGenerousWait) != std::future_status::ready) blockerTimedOut = true;
    blockerReturned.store(true);
  });

  // Created up front: under WithLockHeld the blocked dispatch holds the lock.
  constexpr int kSetters = 2;
  constexpr std::size_t kHandlesPerSetter = 100;
  std::vector<std::vector<TimerHandle>> handles(kSetters,
                                                std::vector<TimerHandle>(kHandlesPerSetter));
  for (auto& mine : handles) {
    for (TimerHandle& handle : mine) handle = f.driver.CreateTimer();
  }
  f.driver.SetOneShotTimer(blocker, 0, 0);
  auto blockingFuture = blocking.get_future();
  REQUIRE(Ready(blockingFuture));

  // While it blocks, two threads set, re-set and cancel timers due within 10 ms, and work out
  // which armings must fire: the last one of each timer unless cancelled, and any earlier one
  // that a set or cancel found no longer pending (detached: it fires regardless).
  constexpr int kOperationsPerSetter = 1000;
  constexpr UserData kNone = 0;
  struct SetterResult {
    std::vector<UserData> mustFire;
    std::vector<std::pair<UserData, Ticks>> deadlines;  // no later than the queue's own
  };
  auto setter = [&](int s) {
    std::mt19937 random(static_cast<unsigned>(s + 11));
    SetterResult result;
    std::vector<UserData>& mustFire = result.mustFire;
    std::vector<UserData> last(kHandlesPerSetter, kNone);
    UserData nextArming = static_cast<UserData>(s + 1) * 1'000'000;
    for (int op = 0; op < kOperationsPerSetter; ++op) {
      const std::size_t j = random() % kHandlesPerSetter;
      bool wasPending;
      UserData arming = kNone;
      if (random() % 4 == 0) {
        wasPending = f.driver.CancelTimer(handles[s][j]);
      } else {
        arming = nextArming++;
        const Milliseconds timeout = random() % 10;
        wasPending = f.driver.SetTimer(handles[s][j], recorder, timeout, arming);
        result.deadlines.emplace_back(arming, clock.GetTickCount() + timeout);
      }
      if (!wasPending && last[j] != kNone) mustFire.push_back(last[j]);
      last[j] = arming;
    }
    for (UserData arming : last) {
      if (arming != kNone) mustFire.push_back(arming);
    }
    return result;
  };
  std::vector<std::future<SetterResult>> setters;
  for (int s = 0; s < kSetters; ++s) setters.push_back(std::async(std::launch::async, setter, s));

  // Callbacks run without the lock: other threads' sets and cancels go ahead meanwhile. Under
  // WithLockHeld they wait for the lock, which the blocked dispatch holds.
  if (!kSetsWaitForCallbacks) {
    for (auto& s : setters) REQUIRE(Ready(s));
  }
  // Let every arming made so far fall due (15 ms, plus one slot of the wheel, plus a margin)
  // while the callback still blocks: a driver that dispatched concurrently (a second io_context
  // thread, another port worker) would run them now.
  const Ticks allDue = clock.GetTickCount() + 15 + TestType::QueueTraits::kGranularity + 50;
  while (clock.GetTickCount() < allDue) std::this_thread::yield();
  const std::size_t firedWhileBlocked = firedCount.Get();
  const Ticks releasedAt = clock.GetTickCount();
  release.set_value();

  std::vector<UserData> mustFire;
  std::vector<std::pair<UserData, Ticks>> deadlines = earlyDeadlines;
  for (UserData arming = 1; arming <= kEarlyArmings; ++arming) mustFire.push_back(arming);
  for (auto& s : setters) {
    REQUIRE(Ready(s));
    SetterResult result = s.get();
    mustFire.insert(mustFire.end(), result.mustFire.begin(), result.mustFire.end());
    deadlines.insert(deadlines.end(), result.deadlines.begin(), result.deadlines.end());
  }
  std::sort(deadlines.begin(), deadlines.end());
  REQUIRE(firedCount.WaitFor(mustFire.size()));
  REQUIRE(FireSentinel(f.driver, 30));  // set after every arming, with a later deadline

  std::vector<UserData> firedArmings;
  std::size_t duringBlocker = 0, beforeRelease = 0;
  Ticks minimumLateness = ~Ticks{0}, maximumLateness = 0;
  {
    std::lock_guard<std::mutex> lock(firedMutex);
    for (const Firing& firing : fired) {
      firedArmings.push_back(firing.arming);
      if (!firing.afterBlocker) ++duringBlocker;
      if (firing.at < releasedAt) ++beforeRelease;
      const auto set = std::lower_bound(deadlines.begin(), deadlines.end(),
                                        std::make_pair(firing.arming, Ticks{0}));
      if (set != deadlines.end() && set->first == firing.arming) {
        const Ticks lateness = firing.at - std::min(firing.at, set->second);
        minimumLateness = std::min(minimumLateness, lateness);
        maximumLateness = std::max(maximumLateness, lateness);
      }
    }
  }
  INFO("fired " << firedArmings.size() << " armings, " << minimumLateness << " to "
                << maximumLateness << " ms after their deadlines; the callback blocked "
                << releasedAt - blockedAt << " ms");
  CHECK_FALSE(blockerTimedOut);
  CHECK(firedWhileBlocked == 0);  // one dispatch at a time, however many threads could run one
  std::sort(firedArmings.begin(), firedArmings.end());
  std::sort(mustFire.begin(), mustFire.end());
  const bool noneTwice =
      std::adjacent_find(firedArmings.begin(), firedArmings.end()) == firedArmings.end();
  CHECK(noneTwice);
  CHECK(firedArmings == mustFire);  // none lost, none that was cancelled or replaced
  CHECK(duringBlocker == 0);        // they all ran after the blocked callback had returned ...
  CHECK(beforeRelease == 0);        // ... so each is late by at least as long as it was blocked

  for (auto& mine : handles) {
    for (TimerHandle& handle : mine) CHECK_FALSE(f.driver.DestroyTimer(handle));
  }
  REQUIRE(f.Shutdown());
  CheckArmingsBalance(f.monitor);
  CHECK(f.monitor.LiveTimers() == 0);
}

// 3. A callback that would end its own driver. A callback may call BeginShutdown, but waiting
// for the shutdown or destroying the driver would wait for the running callback, i.e. for itself:
// ThreadedTimerQueue.h forbids both, AsioTimerQueue.h and DispatchThread.h say that
// WaitForShutdownToComplete throws std::logic_error from a callback (on the dispatch thread), and
// a destructor, which cannot throw, ends the process (the death test below). The legal way to
// let go of the last reference from a callback is to hand it to another thread.
TEMPLATE_TEST_CASE("a callback that waits for its own driver to shut down gets std::logic_error",
                   "[.][realtime][driver][failure]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  FailureFixture<TestType> f;
  auto& driverObject = DriverOf(f.dut->harness);
  bool beginShutdownFirst = false;
  SECTION("without shutting down first") {}
  SECTION("after BeginShutdown") { beginShutdownFirst = true; }

  std::promise<std::string> outcome;
  FunctionTimer waiter([&](UserData) {
    if (beginShutdownFirst) driverObject.BeginShutdown();
    try {
      // A short timeout: a driver that does not see the mistake waits this long, then says false.
      const bool stopped = driverObject.WaitForShutdownToComplete(500ms);
      outcome.set_value(stopped ? "returned true" : "returned false");
    } catch (const std::logic_error& e) {
      outcome.set_value(std::string("std::logic_error: ") + e.what());
    } catch (...) {
      outcome.set_value("another exception");
    }
  });
  std::promise<void> after;
  FunctionTimer afterTimer([&](UserData) { after.set_value(); });
  f.driver.SetOneShotTimer(waiter, 0, 0);
  f.driver.SetOneShotTimer(afterTimer, 30, 0);

  auto outcomeFuture = outcome.get_future();
  REQUIRE(Ready(outcomeFuture));
  const std::string text = outcomeFuture.get();
  CHECK_THAT(text, Catch::Matchers::StartsWith("std::logic_error: ") &&
                       Catch::Matchers::Contains("callback"));
  if (!beginShutdownFirst) {
    auto afterFuture = after.get_future();
    REQUIRE(Ready(afterFuture));  // the mistake is reported to the caller; dispatch carries on
  }
  REQUIRE(f.Shutdown());
  CHECK(f.errors.Messages().empty());
}

TEMPLATE_TEST_CASE("a callback holding the last reference to its driver hands the destruction over",
                   "[.][realtime][driver][failure]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  using Owner = DriverUnderTest<TestType>;
  CountingTimerQueueMonitor monitor;
  ErrorLog errors;
  std::atomic<bool> destroyed{false};
  std::atomic<int> callbacksAfterDestruction{0};
  std::atomic<bool> dropperReturned{false};
  std::promise<std::shared_ptr<Owner>> handOff;
  std::promise<void> reaperStarted;
  std::shared_future<void> reaperStartedFuture = reaperStarted.get_future().share();

  // The only reference besides the test's own, which it drops before anything fires: the one
  // the dropper's owner holds (here, this scope).
  auto owner = std::make_shared<Owner>(SystemTickProvider::Instance(), monitor, errors);
  std::shared_ptr<Owner> lastReference = owner;
  ITimerQueue& driver = owner->driver;
  owner.reset();

  std::atomic<int> othersFired{0};
  FunctionTimer other([&](UserData) {
    ++othersFired;
    if (destroyed.load()) ++callbacksAfterDestruction;
  });
  FunctionTimer dropper([&](UserData) {
    std::shared_ptr<Owner> mine = std::move(lastReference);
    // Timers that would be due at once, and some that never would: none fire after this.
    for (int i = 0; i < 50; ++i) mine->driver.SetOneShotTimer(other, i % 2 == 0 ? 0 : 60'000, 0);
    mine->harness.BeginShutdown();       // allowed from a callback
    handOff.set_value(std::move(mine));  // the driver is not touched after this
    // Still running while another thread destroys the driver: the destruction must wait.
    const auto started = reaperStartedFuture.wait_for(kGenerousWait);
    dropperReturned = started == std::future_status::ready;
  });
  // From here on only the callback uses the driver (under WithLockHeld a call from this thread
  // would wait for the lock that the blocked callback holds).
  driver.SetOneShotTimer(dropper, 0, 0);

  auto handOffFuture = handOff.get_future();
  REQUIRE(Ready(handOffFuture));
  std::shared_ptr<Owner> handedOver = handOffFuture.get();
  CHECK(handedOver.use_count() == 1);
  auto destruction = std::async(std::launch::async, [&, last = std::move(handedOver)]() mutable {
    reaperStarted.set_value();
    last.reset();  // the driver (waiting for the dropper to return), then the queue
    destroyed = true;
  });
  REQUIRE(Ready(destruction));
  CHECK(dropperReturned.load());
  CHECK(callbacksAfterDestruction.load() == 0);
  CHECK(othersFired.load() == 0);    // set before BeginShutdown, but not due before it
  CHECK(monitor.LiveTimers() == 0);  // the unfired one-shots went with the queue
  CHECK(errors.Messages().empty());
}

#ifndef _WIN32
namespace {

struct ChildOutcome {
  bool ended;  // false: still running when the time was up (killed)
  int status;  // from waitpid
  std::string output;
};

// Runs `body` in a child process (fork, so call it while this process runs no other thread) and
// collects what it prints. The child ends with _exit(0) if `body` returns.
ChildOutcome RunInChild(const std::function<void()>& body, std::chrono::milliseconds limit) {
  int pipeFds[2];
  REQUIRE(::pipe(pipeFds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Catch's signal handlers would report the abort as a failure of this process's test.
    std::signal(SIGABRT, SIG_DFL);
    ::dup2(pipeFds[1], STDOUT_FILENO);
    ::dup2(pipeFds[1], STDERR_FILENO);
    ::close(pipeFds[0]);
    ::close(pipeFds[1]);
    body();
    ::_exit(0);
  }
  ::close(pipeFds[1]);
  ChildOutcome outcome{true, 0, {}};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {  // until the child (and so every copy of the pipe's write end) is gone
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd readable{pipeFds[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&readable, 1, static_cast<int>(left.count())) <= 0) {
      outcome.ended = false;
      ::kill(pid, SIGKILL);
      break;
    }
    char buffer[512];
    const ssize_t n = ::read(pipeFds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    outcome.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipeFds[0]);
  ::waitpid(pid, &outcome.status, 0);
  return outcome;
}

}  // namespace

TEMPLATE_TEST_CASE("destroying the driver from its own callback ends the process at once",
                   "[.][realtime][driver][failure][death]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  const ChildOutcome outcome = RunInChild(
      [] {
        CountingTimerQueueMonitor monitor;
        ErrorLog errors;
        auto dut = std::make_unique<DriverUnderTest<TestType>>(SystemTickProvider::Instance(),
                                                               monitor, errors);
        std::promise<void> never;
        FunctionTimer destroyer([&](UserData) { dut.reset(); });
        dut->driver.SetOneShotTimer(destroyer, 0, 0);
        never.get_future().wait_for(kGenerousWait);
        std::fputs("the driver survived its own destruction\n", stderr);
      },
      kGenerousWait);
  INFO("the child said: " << outcome.output);
  REQUIRE(outcome.ended);  // no hang
  CHECK(WIFSIGNALED(outcome.status));
  CHECK((WIFSIGNALED(outcome.status) && WTERMSIG(outcome.status) == SIGABRT));
}
#endif

// 4. The clock jumps.
TEMPLATE_TEST_CASE("a clock that jumps forward by days fires every due timer once, in order",
                   "[driver][failure]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  using QueueTraits = typename TestType::QueueTraits;
  ManualTickProvider ticks;
  FiringLog log;
  FunctionTimer timer([&](UserData index) { log.Record(index, ticks.GetTickCount()); });
  std::unique_ptr<Heartbeat> heartbeat;  // all three outlive the driver, even if a REQUIRE fails
  FailureFixture<TestType> f(ticks);
  heartbeat = std::make_unique<Heartbeat>(f.driver, ticks);

  // Near (under 100 ms), within the jump, and (for the heap) far beyond it.
  constexpr std::size_t kTimers = 3000;
  const Ticks maximum = QueueTraits::kMaximumTimeout;
  const Ticks ranges[] = {100, std::min(maximum, 3 * kDay), std::min(maximum, 40 * kDay)};
  std::vector<TimerHandle> handles(kTimers);
  std::vector<PlannedFiring> planned;
  std::mt19937_64 random(4);
  const Ticks start = ticks.Now();
  for (std::size_t i = 0; i < kTimers; ++i) {
    const auto timeout = static_cast<Milliseconds>(random() % (ranges[i % 3] + 1));
    handles[i] = f.driver.CreateTimer();
    f.driver.SetTimer(handles[i], timer, timeout, i);
    planned.push_back({i, FiringTime<QueueTraits>(start + timeout)});
  }
  // Three days at once, then another 41: everything left.
  const std::vector<Ticks> jumps = {start, start + 3 * kDay, start + 44 * kDay};
  std::size_t notDue = 0;
  auto advanceTo = [&](Ticks to) {
    ticks.SetTime(to);
    if (to == jumps[1]) {
      // Once what the jump made due has fired, the timers beyond it must still be set.
      const auto due = static_cast<std::size_t>(std::count_if(
          planned.begin(), planned.end(), [&](const PlannedFiring& p) { return p.firesAt <= to; }));
      REQUIRE(log.WaitFor(due));
      for (const PlannedFiring& p : planned) {
        if (p.firesAt > to && f.driver.TimerIsSet(handles[p.index])) ++notDue;
      }
    }
  };
  StepClockAndCheck(planned, jumps, advanceTo, log, 0);
  const auto farTimers = static_cast<std::size_t>(
      std::count_if(planned.begin(), planned.end(),
                    [&](const PlannedFiring& p) { return p.firesAt > jumps[1]; }));
  CHECK(notDue == farTimers);
  if (maximum > 3 * kDay) CHECK(farTimers > 0);

  // After the jumps, timers set anew fire on time: over the whole range (up to 100 s), stepping
  // the clock 7.777 s at a time.
  std::vector<PlannedFiring> again;
  const Ticks restart = ticks.Now();
  for (std::size_t i = 0; i < kTimers; ++i) {
    const auto timeout =
        static_cast<Milliseconds>(random() % (std::min<Ticks>(maximum, 100'000) + 1));
    f.driver.SetTimer(handles[i], timer, timeout, i);
    again.push_back({i, FiringTime<QueueTraits>(restart + timeout)});
  }
  std::vector<Ticks> steps = {restart};  // timeouts of 0 fire at once
  for (Ticks t = restart + 7'777; steps.empty() || steps.back() < restart + 100'000 + 15;
       t += 7'777) {
    steps.push_back(t);
  }
  auto setTime = [&](Ticks to) { ticks.SetTime(to); };
  StepClockAndCheck(again, steps, setTime, log, kTimers);

  REQUIRE(heartbeat->WaitForBeatAt(ticks.Now()));
  REQUIRE(f.Shutdown());
  heartbeat->Destroy();
  for (TimerHandle& handle : handles) CHECK_FALSE(f.driver.DestroyTimer(handle));
  CheckArmingsBalance(f.monitor);
  f.dut->queue->CheckInvariants();
  CHECK(f.monitor.LiveTimers() == 0);
  CHECK(f.errors.Messages().empty());
}

TEMPLATE_TEST_CASE("timers pending across the wrap of a 32-bit tick count all fire, in order",
                   "[driver][failure]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  using QueueTraits = typename TestType::QueueTraits;
  constexpr Ticks kWrap = Ticks{1} << 32;
  ManualWrappingTickSource source(static_cast<std::uint32_t>(kWrap - 30'007));
  WrappingTickAdapter ticks(source);
  FiringLog log;
  FunctionTimer timer([&](UserData index) { log.Record(index, ticks.GetTickCount()); });
  std::unique_ptr<Heartbeat> heartbeat;  // all three outlive the driver, even if a REQUIRE fails
  FailureFixture<TestType> f(ticks);
  heartbeat = std::make_unique<Heartbeat>(f.driver, ticks);

  constexpr std::size_t kTimers = 2000;
  const Ticks range = std::min<Ticks>(QueueTraits::kMaximumTimeout, 60'000);
  std::vector<TimerHandle> handles(kTimers);
  for (TimerHandle& handle : handles) handle = f.driver.CreateTimer();
  std::mt19937_64 random(5);
  // The source only moves forward, so "now" is the adapter's value plus what the source moved.
  auto advanceTo = [&](Ticks to) {
    const Ticks now = ticks.GetTickCount();
    source.Advance(static_cast<std::uint32_t>(to - now));
  };
  std::size_t logged = 0;
  for (int round = 0; round < 2; ++round) {  // set before the wrap, then again after it
    const Ticks start = ticks.GetTickCount();
    std::vector<PlannedFiring> planned;
    for (std::size_t i = 0; i < kTimers; ++i) {
      const auto timeout = static_cast<Milliseconds>(random() % (range + 1));
      f.driver.SetTimer(handles[i], timer, timeout, i);
      planned.push_back({i, FiringTime<QueueTraits>(start + timeout)});
    }
    std::vector<Ticks> steps = {start};  // timeouts of 0 fire at once
    for (Ticks t = start + 7'001; steps.empty() || steps.back() < start + range + 15; t += 7'001) {
      steps.push_back(t);
    }
    if (round == 0) {
      REQUIRE(steps[1] < kWrap);
      REQUIRE(steps.back() > kWrap);  // the 32-bit source wraps during this round
    }
    StepClockAndCheck(planned, steps, advanceTo, log, logged);
    logged += kTimers;
  }
  CHECK(ticks.GetTickCount() > kWrap);
  CHECK(source.GetTickCount32() < 1'000'000);

  REQUIRE(heartbeat->WaitForBeatAt(ticks.GetTickCount()));
  REQUIRE(f.Shutdown());
  heartbeat->Destroy();
  for (TimerHandle& handle : handles) CHECK_FALSE(f.driver.DestroyTimer(handle));
  CheckArmingsBalance(f.monitor);
  CHECK(f.monitor.LiveTimers() == 0);
}

// 5. Shutdown in the middle of everything.
TEMPLATE_TEST_CASE("shutdown while a callback runs and other threads hammer the driver",
                   "[.][realtime][driver][failure]", TIMERWHEEL_ALL_DRIVER_TRAITS) {
  constexpr bool kSetsWaitForCallbacks = PolicyOf<TestType>::value == DispatchPolicy::WithLockHeld;
  CountingTimerQueueMonitor monitor;
  ErrorLog errors;
  auto dut =
      std::make_unique<DriverUnderTest<TestType>>(SystemTickProvider::Instance(), monitor, errors);
  ITimerQueue& driver = dut->driver;

  std::atomic<bool> shutdownReturned{false};
  std::atomic<int> callbacksAfterShutdown{0};
  std::atomic<std::size_t> fired{0};
  constexpr std::size_t kShared = 32;
  std::array<std::atomic<TimerHandle>, kShared> shared;
  for (auto& handle : shared) handle.store(driver.CreateTimer());

  FunctionTimer work([&](UserData index) {
    if (shutdownReturned.load()) ++callbacksAfterShutdown;
    fired.fetch_add(1);
    if (index < kShared && index % 2 == 0) {  // some re-arm themselves
      try {
        driver.SetTimer(shared[index].load(), work, 1, index);
      } catch (const InvalidTimerHandle&) {
      }
    }
  });
  std::promise<void> blocking;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> blockerReturned{false};
  FunctionTimer blocker([&](UserData) {
    if (shutdownReturned.load()) ++callbacksAfterShutdown;
    blocking.set_value();
    released.wait_for(kGenerousWait);
    blockerReturned.store(true);
  });

  // Each hammer goes on for kAfterShutdown operations once shutdown has completed.
  constexpr int kHammers = 2;
  constexpr int kAfterShutdown = 2000;
  auto hammer = [&](int h) {
    std::mt19937 random(static_cast<unsigned>(h + 21));
    std::vector<TimerHandle> own(16);
    for (TimerHandle& handle : own) handle = driver.CreateTimer();
    int afterShutdown = 0;
    std::size_t operations = 0;
    while (afterShutdown < kAfterShutdown) {
      if (shutdownReturned.load()) ++afterShutdown;
      ++operations;
      const std::size_t index = random() % kShared;
      try {
        switch (random() % 10) {
          case 0:
          case 1:
          case 2:
            driver.SetTimer(shared[index].load(), work, random() % 4, index);
            break;
          case 3:
            driver.SetTimer(own[index % own.size()], work, random() % 4, kShared + index);
            break;
          case 4:
            driver.CancelTimer(shared[index].load());
            break;
          case 5:
            driver.SetOneShotTimer(work, random() % 4, kShared + index);
            break;
          case 6: {
            TimerHandle& mine = own[index % own.size()];
            driver.DestroyTimer(mine);
            mine = driver.CreateTimer();
            break;
          }
          case 7:
            driver.UpdateTimer(shared[index].load(), work, random() % 4, index,
                               ITimerQueue::UpdateIf::NewTimeIsSooner);
            break;
          default: {
            TimerHandle fresh = driver.CreateTimer();
            TimerHandle expected = shared[index].load();
            if (shared[index].compare_exchange_strong(expected, fresh)) {
              driver.DestroyTimer(expected);
            } else {
              driver.DestroyTimer(fresh);
            }
          }
        }
      } catch (const InvalidTimerHandle&) {
        // Another thread destroyed a shared handle first: allowed, changes nothing.
      }
    }
    for (TimerHandle& handle : own) driver.DestroyTimer(handle);
    return operations;
  };
  std::vector<std::future<std::size_t>> hammers;
  for (int h = 0; h < kHammers; ++h) hammers.push_back(std::async(std::launch::async, hammer, h));

  driver.SetOneShotTimer(blocker, 5, 0);
  auto blockingFuture = blocking.get_future();
  REQUIRE(Ready(blockingFuture));
  std::promise<void> shutdownBegun;
  auto stopping = std::async(std::launch::async, [&] {
    // Under WithLockHeld, BeginShutdown waits for the lock, which the blocked dispatch holds.
    dut->harness.BeginShutdown();
    shutdownBegun.set_value();
    const bool stopped = DriverOf(dut->harness).WaitForShutdownToComplete(kGenerousWait);
    shutdownReturned.store(true);
    return stopped;
  });
  if (!kSetsWaitForCallbacks) {
    auto begun = shutdownBegun.get_future();
    REQUIRE(Ready(begun));
    // The blocked callback is still running, so the shutdown cannot have completed.
    CHECK(stopping.wait_for(0s) == std::future_status::timeout);
  }
  release.set_value();
  REQUIRE(Ready(stopping));
  REQUIRE(stopping.get());
  CHECK(blockerReturned.load());  // completion waited for the running callback
  const std::size_t firedAtShutdown = fired.load();

  // Calls after shutdown still work on the queue; what they arm never fires.
  TimerHandle late = driver.CreateTimer();
  CHECK_FALSE(driver.SetTimer(late, work, 0, kShared));
  CHECK(driver.TimerIsSet(late));
  for (auto& h : hammers) {
    REQUIRE(Ready(h));
    CHECK(h.get() >= static_cast<std::size_t>(kAfterShutdown));  // no call failed after shutdown
  }
  CHECK(driver.TimerIsSet(late));
  CHECK(driver.DestroyTimer(late));
  for (auto& handle : shared) {
    TimerHandle h = handle.exchange(TimerHandle{});
    driver.DestroyTimer(h);
  }
  dut.reset();  // joins everything the driver and harness run; frees what never fired
  CHECK(fired.load() == firedAtShutdown);
  CHECK(callbacksAfterShutdown.load() == 0);
  CHECK(monitor.LiveTimers() == 0);
  CHECK(errors.Messages().empty());
}

// 6. The heap runs out. The Asio driver's aims (a wait of its steady_timer, a posted dispatch) are
// operations it starts under its lock from every set that brings the next expiry forward. Before,
// their memory was not reserved, and the aim was committed (its number and m_aimedAt) before the
// operation that allocates was started: a set at a new high-water mark of operations (a wait
// cancelled by a sooner aim whose completion had not run, plus the new wait; or a posted dispatch
// beside the wait) threw std::bad_alloc having set the timer, the pending wait's completion was
// stale, m_aimedAt stayed at the failed aim, and no set at or after it aimed again: the queue
// never dispatched again. Each section fails the first allocation the set makes; the io_context
// is run by this thread, and the clock is the test's, so only the driver's aim can fire a timer.
namespace {

// Runs `io`'s handlers until `done` or `timeout` (real time: generous, the waits here are of
// 10 ms); false at the timeout, or at once if `io` has nothing left to run (nothing will fire).
bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done,
              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (io.stopped()) io.restart();  // it ran out of work before: a set since may have given it some
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.run_one_until(deadline) == 0 && io.stopped()) return done();
  }
  return true;
}

}  // namespace

TEST_CASE("the Asio driver's aims survive a heap with no room, and every set timer fires",
          "[driver][allocation]") {
  ManualTickProvider ticks;
  CountingTimerQueueMonitor monitor;
  auto queue = WheelTraits::Make(ticks, &monitor);  // a set finds due what the clock passed
  boost::asio::io_context io;
  AsioTimerQueueOptions options;
  options.monitor = &monitor;
  auto driver = std::make_unique<AsioTimerQueue>(io, *queue, options);
  std::vector<UserData> fired;
  FunctionTimer timer([&](UserData data) { fired.push_back(data); });
  TimerHandle first = driver->CreateTimer();
  TimerHandle second = driver->CreateTimer();
  bool threw = false, heapNeeded = false;
  auto setWithHeapExhausted = [&](TimerHandle handle, Milliseconds timeout, UserData data) {
    FailNthAllocation heapExhausted(1);
    try {
      driver->SetTimer(handle, timer, timeout, data);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    heapNeeded = heapExhausted.Failed();
  };

  SECTION("a set that finds an expiry due posts its dispatch from reserved memory") {
    driver->SetTimer(first, timer, 1000, 1);  // the wait, outstanding (1 s of real time)
    io.poll();
    ticks.Advance(2000);
    setWithHeapExhausted(second, 50'000, 2);  // finds `first` due: posts a dispatch
    CHECK_FALSE(threw);
    CHECK_FALSE(heapNeeded);
    REQUIRE(RunUntil(
        io, [&] { return !fired.empty(); }, 10s));
    CHECK(fired == std::vector<UserData>{1});
  }
  SECTION("a set that brings the next expiry forward re-aims the outstanding wait") {
    driver->SetTimer(first, timer, 50'000, 1);
    io.poll();
    setWithHeapExhausted(second, 10, 2);  // sooner: the wait is re-aimed
    CHECK_FALSE(threw);
    CHECK_FALSE(heapNeeded);
    ticks.Advance(30);  // past the 15 ms slot
    REQUIRE(RunUntil(
        io, [&] { return !fired.empty(); }, 10s));
    CHECK(fired == std::vector<UserData>{2});
  }
  SECTION("a wait that Asio cannot start (its own timer heap) is retried, not left unaimed") {
    // The io_context's first wait grows Asio's heap of waiting timers: the driver's own memory
    // is reserved, but that allocation is Asio's. The set keeps its timer, says nothing, and
    // the driver retries from a posted operation.
    setWithHeapExhausted(first, 10, 1);
    CHECK_FALSE(threw);
    CHECK(heapNeeded);
    ticks.Advance(30);  // past the 15 ms slot
    REQUIRE(RunUntil(
        io, [&] { return !fired.empty(); }, 10s));
    CHECK(fired == std::vector<UserData>{1});
  }
  // And the driver goes on aiming: a later set fires too.
  fired.clear();
  driver->SetTimer(first, timer, 10, 3);
  ticks.Advance(30);  // past the 15 ms slot
  REQUIRE(RunUntil(
      io, [&] { return !fired.empty(); }, 10s));
  CHECK(fired == std::vector<UserData>{3});

  driver->DestroyTimer(first);
  driver->DestroyTimer(second);
  driver->BeginShutdown();
  io.poll();
  CHECK(driver->WaitForShutdownToComplete(std::chrono::milliseconds(0)));
  driver.reset();
  CHECK(monitor.LiveTimers() == 0);
}
