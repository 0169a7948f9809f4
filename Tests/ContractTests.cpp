// The ITimerQueue / IManageTimerQueue contract, run against every implementation through traits.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

#include "Support/QueueFixture.h"

using namespace timerwheel;
using namespace timerwheel::test;
using SetIf = ITimerQueue::SetIf;
using UpdateIf = ITimerQueue::UpdateIf;

TEMPLATE_TEST_CASE("a new timer is unset, reads no clock and can be destroyed", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  const auto readsBefore = f.ticks.Reads();
  TimerHandle handle = f.queue->CreateTimer();
  CHECK(f.ticks.Reads() == readsBefore);
  CHECK_FALSE(handle.IsNull());
  CHECK_FALSE(f.queue->TimerIsSet(handle));
  CHECK(f.monitor.LiveTimers() == 1);

  CHECK_FALSE(f.queue->DestroyTimer(handle));
  CHECK(handle.IsNull());
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("null, destroyed and stale handles throw InvalidTimerHandle and change nothing",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  auto requireRejected = [&](TimerHandle bad) {
    TimerHandle copy = bad;
    CHECK_THROWS_AS(f.queue->TimerIsSet(bad), InvalidTimerHandle);
    CHECK_THROWS_AS(f.queue->SetTimer(bad, f.timer, 10, 1), InvalidTimerHandle);
    CHECK_THROWS_AS(f.queue->UpdateTimer(bad, f.timer, 10, 1), InvalidTimerHandle);
    CHECK_THROWS_AS(f.queue->CancelTimer(bad), InvalidTimerHandle);
    CHECK_THROWS_AS(f.queue->DestroyTimer(copy), InvalidTimerHandle);
    CHECK(copy == bad);  // a failed destroy leaves the caller's variable alone
    // InvalidTimerHandle is an std::invalid_argument.
    CHECK_THROWS_AS(f.queue->CancelTimer(bad), std::invalid_argument);
  };

  SECTION("a default-constructed handle") { requireRejected(TimerHandle{}); }

  SECTION("a copy of a destroyed handle, and a destroyed handle whose slot was reused") {
    TimerHandle handle = f.queue->CreateTimer();
    const TimerHandle stale = handle;
    f.queue->DestroyTimer(handle);
    requireRejected(stale);

    TimerHandle reused = f.queue->CreateTimer();
    CHECK(reused.Index() == stale.Index());  // the pool reuses the slot...
    CHECK(reused != stale);                  // ...under a new generation
    f.queue->SetTimer(reused, f.timer, 100, 7);
    requireRejected(stale);
    // The new timer was not touched by any of the rejected calls.
    CHECK(f.queue->TimerIsSet(reused));
    f.DispatchAt(f.FiringTimeFor(100));
    REQUIRE(f.timer.UserDataInOrder() == std::vector<UserData>{7});
    f.queue->DestroyTimer(reused);
  }
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("a timer fires once, at its deadline and never before", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  TimerHandle handle = f.queue->CreateTimer();
  const Ticks fireAt = f.FiringTimeFor(100);
  CHECK_FALSE(f.queue->SetTimer(handle, f.timer, 100, 42));
  CHECK(f.queue->TimerIsSet(handle));

  CHECK(f.DispatchAt(fireAt - 1) == 0);
  CHECK(f.queue->GetNextTimeout() == 1);
  CHECK(f.timer.Count() == 0);

  CHECK(f.DispatchAt(fireAt) == 1);
  REQUIRE(f.timer.Count() == 1);
  CHECK(f.timer.Firings()[0].userData == 42);
  CHECK(f.timer.Firings()[0].at == fireAt);
  CHECK_FALSE(f.queue->TimerIsSet(handle));
  CHECK(f.queue->GetNextTimeout() == kInfinite);

  CHECK(f.DispatchAt(fireAt + 10'000) == 0);
  CHECK(f.timer.Count() == 1);
  CHECK(f.monitor.Fired() == 1);
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("re-setting a pending timer replaces its deadline and user data", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  RecordingTimer other{f.ticks};
  TimerHandle handle = f.queue->CreateTimer();
  CHECK_FALSE(f.queue->SetTimer(handle, f.timer, 1000, 1));
  f.ticks.Advance(10);

  SECTION("to a later deadline") {
    const Ticks fireAt = f.FiringTimeFor(2000);
    CHECK(f.queue->SetTimer(handle, other, 2000, 2));
    f.DispatchAt(fireAt - 1);
    CHECK(other.Count() == 0);
    f.DispatchAt(fireAt);
    CHECK(other.UserDataInOrder() == std::vector<UserData>{2});
  }
  SECTION("to a sooner deadline") {
    const Ticks fireAt = f.FiringTimeFor(50);
    CHECK(f.queue->SetTimer(handle, other, 50, 3));
    f.DispatchAt(fireAt);
    CHECK(other.UserDataInOrder() == std::vector<UserData>{3});
  }
  f.DispatchAt(f.ticks.Now() + 10'000);
  CHECK(f.timer.Count() == 0);  // the first arming never fires
  CHECK(other.Count() == 1);
  CHECK_FALSE(f.queue->DestroyTimer(handle));
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("SetIf::NotSet sets an unset timer and leaves a pending one unchanged",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  RecordingTimer other{f.ticks};
  TimerHandle handle = f.queue->CreateTimer();
  const Ticks fireAt = f.FiringTimeFor(100);
  CHECK_FALSE(f.queue->SetTimer(handle, f.timer, 100, 1, SetIf::NotSet));
  CHECK(f.queue->TimerIsSet(handle));

  CHECK(f.queue->SetTimer(handle, other, 10, 2, SetIf::NotSet));    // sooner: ignored
  CHECK(f.queue->SetTimer(handle, other, 5000, 3, SetIf::NotSet));  // later: ignored
  f.DispatchAt(fireAt - 1);
  CHECK(f.timer.Count() == 0);
  f.DispatchAt(fireAt);
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
  f.DispatchAt(fireAt + 10'000);
  CHECK(other.Count() == 0);
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("UpdateTimer on an unset timer sets it, whatever the condition", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  const UpdateIf condition = GENERATE(UpdateIf::Always, UpdateIf::NewTimeIsSooner,
                                      UpdateIf::NewTimeIsLater, UpdateIf::AlwaysNoTimeoutChange);
  TimerHandle handle = f.queue->CreateTimer();
  bool wasUpdated = false;
  const Ticks fireAt = f.FiringTimeFor(300);
  CHECK_FALSE(f.queue->UpdateTimer(handle, f.timer, 300, 9, condition, &wasUpdated));
  CHECK(wasUpdated);
  CHECK(f.queue->TimerIsSet(handle));
  f.DispatchAt(fireAt - 1);
  CHECK(f.timer.Count() == 0);
  f.DispatchAt(fireAt);
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{9});
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("UpdateTimer on a pending timer reschedules only when its condition holds",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  RecordingTimer other{f.ticks};
  TimerHandle handle = f.queue->CreateTimer();
  f.queue->SetTimer(handle, f.timer, 1000, 1);  // deadline = start + 1000
  const Ticks originalFireAt = f.FiringTimeFor(1000);
  f.ticks.Advance(100);  // now the "same deadline" is timeout 900

  struct Case {
    UpdateIf condition;
    Milliseconds timeout;
    bool expectUpdate;
  };
  const Case c = GENERATE(
      Case{UpdateIf::Always, 500, true}, Case{UpdateIf::Always, 2000, true},
      Case{UpdateIf::Always, 900, true}, Case{UpdateIf::NewTimeIsSooner, 500, true},
      Case{UpdateIf::NewTimeIsSooner, 900, false},  // equal is not sooner
      Case{UpdateIf::NewTimeIsSooner, 2000, false}, Case{UpdateIf::NewTimeIsLater, 2000, true},
      Case{UpdateIf::NewTimeIsLater, 900, false},  // equal is not later
      Case{UpdateIf::NewTimeIsLater, 500, false});
  CAPTURE(static_cast<int>(c.condition), c.timeout);

  bool wasUpdated = !c.expectUpdate;
  const Ticks newFireAt = f.FiringTimeFor(c.timeout);
  CHECK(f.queue->UpdateTimer(handle, other, c.timeout, 2, c.condition, &wasUpdated));
  CHECK(wasUpdated == c.expectUpdate);
  CHECK(f.queue->TimerIsSet(handle));

  RecordingTimer& expectedTimer = c.expectUpdate ? other : f.timer;
  const UserData expectedData = c.expectUpdate ? 2 : 1;
  const Ticks expectedFireAt = c.expectUpdate ? newFireAt : originalFireAt;
  f.DispatchAt(expectedFireAt - 1);
  CHECK(expectedTimer.Count() == 0);
  f.DispatchAt(expectedFireAt);
  REQUIRE(expectedTimer.Count() == 1);
  CHECK(expectedTimer.Firings()[0].userData == expectedData);
  f.DispatchAt(f.ticks.Now() + 10'000);
  CHECK(f.timer.Count() + other.Count() == 1);
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE(
    "UpdateIf::AlwaysNoTimeoutChange replaces timer and user data, keeps the deadline",
    "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  RecordingTimer other{f.ticks};
  TimerHandle first = f.queue->CreateTimer();
  TimerHandle second = f.queue->CreateTimer();
  const Ticks fireAt = f.FiringTimeFor(1000);
  f.queue->SetTimer(first, f.timer, 1000, 1);
  f.queue->SetTimer(second, f.timer, 1000, 2);  // same deadline, set after `first`
  f.ticks.Advance(100);

  bool wasUpdated = false;
  const auto readsBefore = f.ticks.Reads();
  CHECK(f.queue->UpdateTimer(first, other, 5, 3, UpdateIf::AlwaysNoTimeoutChange, &wasUpdated));
  CHECK(wasUpdated);
  CHECK(f.ticks.Reads() == readsBefore);  // nothing to compute from the clock

  f.DispatchAt(fireAt - 1);
  CHECK(other.Count() + f.timer.Count() == 0);
  f.DispatchAt(fireAt);
  CHECK(other.UserDataInOrder() == std::vector<UserData>{3});
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{2});
  // It kept its place in the firing order too: `first` fired before `second`.
  CHECK(other.Firings()[0].at == f.timer.Firings()[0].at);

  SECTION("the timeout is still checked against the maximum") {
    f.queue->SetTimer(first, f.timer, 10, 4);
    if (TestType::kMaximumTimeout < kInfinite - 1) {
      CHECK_THROWS_AS(f.queue->UpdateTimer(first, other, TestType::kMaximumTimeout + 1, 5,
                                           UpdateIf::AlwaysNoTimeoutChange),
                      std::out_of_range);
    }
    CHECK_THROWS_AS(
        f.queue->UpdateTimer(first, other, kInfinite, 5, UpdateIf::AlwaysNoTimeoutChange),
        std::out_of_range);
    f.DispatchAt(f.FiringTimeFor(10));
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{2, 4});
  }
  f.queue->DestroyTimer(first);
  f.queue->DestroyTimer(second);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("CancelTimer unschedules a pending timer and reports whether it was pending",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  TimerHandle handle = f.queue->CreateTimer();

  SECTION("never set") { CHECK_FALSE(f.queue->CancelTimer(handle)); }
  SECTION("pending") {
    f.queue->SetTimer(handle, f.timer, 100, 1);
    CHECK(f.queue->CancelTimer(handle));
    CHECK_FALSE(f.queue->TimerIsSet(handle));
    CHECK(f.queue->GetNextTimeout() == kInfinite);
    CHECK_FALSE(f.queue->CancelTimer(handle));  // the second cancel finds nothing
  }
  SECTION("already fired") {
    f.queue->SetTimer(handle, f.timer, 100, 1);
    f.DispatchAt(f.FiringTimeFor(100));
    CHECK(f.timer.Count() == 1);
    CHECK_FALSE(f.queue->CancelTimer(handle));
  }
  SECTION("a cancelled timer can be set again") {
    f.queue->SetTimer(handle, f.timer, 100, 1);
    f.queue->CancelTimer(handle);
    CHECK_FALSE(f.queue->SetTimer(handle, f.timer, 200, 2));
    f.DispatchAt(f.FiringTimeFor(200));
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{2});
  }
  f.DispatchAt(f.ticks.Now() + 100'000);
  CHECK(f.timer.Count() <= 1);
  CHECK(f.monitor.Fired() == f.timer.Count());
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("DestroyTimer cancels a pending timer", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  TimerHandle handle = f.queue->CreateTimer();
  f.queue->SetTimer(handle, f.timer, 100, 1);
  CHECK(f.queue->DestroyTimer(handle));
  CHECK(handle.IsNull());
  CHECK(f.queue->GetNextTimeout() == kInfinite);
  f.DispatchAt(f.ticks.Now() + 100'000);
  CHECK(f.timer.Count() == 0);
  CHECK(f.monitor.DestroyedWhilePending() == 1);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("a zero timeout fires at the next dispatch at or after the current slot",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  TimerHandle handle = f.queue->CreateTimer();
  const Ticks fireAt = f.FiringTimeFor(0);
  f.queue->SetTimer(handle, f.timer, 0, 5);
  CHECK(f.queue->GetNextTimeout() == fireAt - f.ticks.Now());
  CHECK(f.DispatchAt(fireAt) == 1);
  CHECK(f.timer.Firings()[0].at == fireAt);
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE(
    "the maximum timeout is accepted and one more is rejected with the timer unchanged",
    "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  const Milliseconds maximum = f.queue->GetMaximumTimeout();
  REQUIRE(maximum == TestType::kMaximumTimeout);
  TimerHandle handle = f.queue->CreateTimer();

  SECTION("exactly the maximum fires on time") {
    const Ticks fireAt = f.FiringTimeFor(maximum);
    f.queue->SetTimer(handle, f.timer, maximum, 1);
    CHECK(f.queue->GetNextTimeout() == fireAt - f.ticks.Now());
    f.DispatchAt(fireAt - 1);
    CHECK(f.timer.Count() == 0);
    f.DispatchAt(fireAt);
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
  }
  SECTION("one over the maximum leaves a pending timer exactly as it was") {
    const Ticks fireAt = f.FiringTimeFor(100);
    f.queue->SetTimer(handle, f.timer, 100, 1);
    const Milliseconds over = maximum + 1;  // kInfinite for the heap
    CHECK_THROWS_AS(f.queue->SetTimer(handle, f.timer, over, 2), std::out_of_range);
    CHECK_THROWS_AS(f.queue->SetTimer(handle, f.timer, over, 2, SetIf::NotSet), std::out_of_range);
    CHECK_THROWS_AS(f.queue->UpdateTimer(handle, f.timer, over, 3), std::out_of_range);
    CHECK_THROWS_AS(f.queue->UpdateTimer(handle, f.timer, over, 3, UpdateIf::NewTimeIsLater),
                    std::out_of_range);
    CHECK(f.queue->TimerIsSet(handle));
    f.DispatchAt(fireAt - 1);
    CHECK(f.timer.Count() == 0);
    f.DispatchAt(fireAt);
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
  }
  SECTION("one over the maximum leaves an unset timer unset and creates no one-shot") {
    CHECK_THROWS_AS(f.queue->SetTimer(handle, f.timer, maximum + 1, 2), std::out_of_range);
    CHECK_THROWS_AS(f.queue->SetOneShotTimer(f.timer, maximum + 1, 2), std::out_of_range);
    CHECK_FALSE(f.queue->TimerIsSet(handle));
    CHECK(f.queue->GetNextTimeout() == kInfinite);
    CHECK(f.monitor.OneShotCreated() == 0);
  }
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("GetNextTimeout counts down, and reads no clock when nothing is set",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  auto readsBefore = f.ticks.Reads();
  CHECK(f.queue->GetNextTimeout() == kInfinite);
  CHECK(f.ticks.Reads() == readsBefore);

  TimerHandle handle = f.queue->CreateTimer();
  const Ticks fireAt = f.FiringTimeFor(1000);
  f.queue->SetTimer(handle, f.timer, 1000, 1);
  for (Ticks now = f.ticks.Now(); now <= fireAt; now += 97) {
    f.ticks.SetTime(now);
    CHECK(f.queue->GetNextTimeout() == fireAt - now);
  }
  f.ticks.SetTime(fireAt + 5);
  CHECK(f.queue->GetNextTimeout() == 0);  // overdue is 0, not negative
  f.queue->CancelTimer(handle);

  readsBefore = f.ticks.Reads();
  CHECK(f.queue->GetNextTimeout() == kInfinite);
  CHECK(f.ticks.Reads() == readsBefore);
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("timers fire in deadline order, and equal deadlines in the order they were set",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  std::vector<TimerHandle> handles;
  for (int i = 0; i < 6; ++i) handles.push_back(f.queue->CreateTimer());

  // Deadlines far apart (several granularities) so that every implementation separates them.
  const Milliseconds unit = 10 * TestType::kGranularity;
  f.queue->SetTimer(handles[0], f.timer, 3 * unit, 30);
  f.queue->SetTimer(handles[1], f.timer, 1 * unit, 10);
  f.queue->SetTimer(handles[2], f.timer, 2 * unit, 20);
  f.queue->SetTimer(handles[3], f.timer, 2 * unit, 21);
  f.queue->SetTimer(handles[4], f.timer, 2 * unit, 22);
  f.queue->SetTimer(handles[5], f.timer, 1 * unit, 11);
  // Re-setting to the same deadline moves a timer to the back of its group.
  f.queue->SetTimer(handles[2], f.timer, 2 * unit, 23);

  f.DispatchAt(f.ticks.Now() + 10 * unit);  // all due at once: one dispatch, in order
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{10, 11, 21, 22, 23, 30});
  for (TimerHandle& handle : handles) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("a dispatch detaches every due timer, and later timers stay pending",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  std::vector<TimerHandle> handles;
  const Milliseconds unit = 10 * TestType::kGranularity;
  const Ticks start = f.ticks.Now();
  for (UserData i = 0; i < 10; ++i) {
    handles.push_back(f.queue->CreateTimer());
    f.queue->SetTimer(handles.back(), f.timer, static_cast<Milliseconds>((i + 1) * unit), i);
  }
  f.ticks.SetTime(FiringTime<TestType>(start + 5 * unit));  // the fifth timer's firing time
  REQUIRE(f.queue->BeginTimeoutHandling());
  for (UserData i = 0; i < 10; ++i) CHECK(f.queue->TimerIsSet(handles[i]) == (i >= 5));
  CHECK(f.queue->HandleTimeout() == 5);
  f.queue->EndTimeoutHandling();
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{0, 1, 2, 3, 4});
  CHECK(f.queue->GetNextTimeout() > 0);
  for (TimerHandle& handle : handles) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("changing a timer after Begin affects only its next arming", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  RecordingTimer other{f.ticks};
  TimerHandle handle = f.queue->CreateTimer();
  f.queue->SetTimer(handle, f.timer, 100, 1);
  f.ticks.SetTime(f.FiringTimeFor(100));
  REQUIRE(f.queue->BeginTimeoutHandling());
  CHECK_FALSE(f.queue->TimerIsSet(handle));

  SECTION("cancel returns false and does not stop the detached callback") {
    CHECK_FALSE(f.queue->CancelTimer(handle));
    f.queue->HandleTimeout();
    f.queue->EndTimeoutHandling();
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
  }
  SECTION("re-set: the detached callback runs with the old data, then the new arming fires") {
    const Ticks nextFireAt = f.FiringTimeFor(200);
    CHECK_FALSE(f.queue->SetTimer(handle, other, 200, 2));
    f.queue->HandleTimeout();
    f.queue->EndTimeoutHandling();
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
    CHECK(f.queue->TimerIsSet(handle));
    f.DispatchAt(nextFireAt);
    CHECK(other.UserDataInOrder() == std::vector<UserData>{2});
  }
  SECTION("re-set then cancel: the detached callback still runs, the new arming never does") {
    f.queue->SetTimer(handle, other, 200, 2);
    CHECK(f.queue->CancelTimer(handle));
    f.queue->HandleTimeout();
    f.queue->EndTimeoutHandling();
    f.DispatchAt(f.ticks.Now() + 10'000);
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
    CHECK(other.Count() == 0);
  }
  SECTION("destroy: the handle is invalid at once, the record is freed at End") {
    CHECK_FALSE(f.queue->DestroyTimer(handle));
    CHECK(f.monitor.LiveTimers() == 1);
    f.queue->HandleTimeout();
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
    f.queue->EndTimeoutHandling();
    CHECK(f.monitor.LiveTimers() == 0);
  }
  SECTION("changes between Handle and End behave the same") {
    f.queue->HandleTimeout();
    const Ticks nextFireAt = f.FiringTimeFor(300);
    CHECK_FALSE(f.queue->SetTimer(handle, other, 300, 3));
    f.queue->EndTimeoutHandling();
    f.DispatchAt(nextFireAt);
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1});
    CHECK(other.UserDataInOrder() == std::vector<UserData>{3});
    CHECK(f.queue->DestroyTimer(handle) == false);
    CHECK(handle.IsNull());
  }
  if (!handle.IsNull()) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("a callback may re-set, cancel or destroy its own timer", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  TimerHandle handle = f.queue->CreateTimer();
  f.queue->SetTimer(handle, f.timer, 100, 1);

  SECTION("re-set from inside fires again later with the new data") {
    f.timer.OnFire([&](UserData userData) {
      if (userData == 1) CHECK_FALSE(f.queue->SetTimer(handle, f.timer, 100, 2));
    });
    f.DispatchAt(f.FiringTimeFor(100));
    CHECK(f.queue->TimerIsSet(handle));
    f.DispatchAt(f.FiringTimeFor(100));
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{1, 2});
  }
  SECTION("cancel from inside finds nothing pending") {
    f.timer.OnFire([&](UserData) { CHECK_FALSE(f.queue->CancelTimer(handle)); });
    f.DispatchAt(f.FiringTimeFor(100));
    CHECK(f.timer.Count() == 1);
  }
  SECTION("destroy from inside frees the timer once the dispatch ends") {
    f.timer.OnFire([&](UserData) {
      CHECK_FALSE(f.queue->DestroyTimer(handle));
      CHECK(handle.IsNull());
    });
    f.DispatchAt(f.FiringTimeFor(100));
    CHECK(f.timer.Count() == 1);
  }
  SECTION("re-set with timeout 0 from inside does not run again in the same dispatch") {
    f.timer.OnFire([&](UserData) { f.queue->SetTimer(handle, f.timer, 0, 3); });
    CHECK(f.DispatchAt(f.FiringTimeFor(100)) == 1);
    CHECK(f.queue->TimerIsSet(handle));
    f.queue->CancelTimer(handle);
  }
  f.timer.OnFire(nullptr);
  if (!handle.IsNull()) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("HandleTimeout honours its budget and End keeps what was not dispatched",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  std::vector<TimerHandle> handles;
  for (UserData i = 0; i < 10; ++i) {
    handles.push_back(f.queue->CreateTimer());
    f.queue->SetTimer(handles.back(), f.timer, 100, i);
  }
  f.ticks.SetTime(f.FiringTimeFor(100));

  SECTION("resumable within one dispatch") {
    REQUIRE(f.queue->BeginTimeoutHandling());
    CHECK(f.queue->HandleTimeout(3) == 3);
    CHECK(f.queue->HandleTimeout(3) == 3);
    CHECK(f.queue->HandleTimeout(3) == 3);
    CHECK(f.queue->HandleTimeout(3) == 1);
    CHECK(f.queue->HandleTimeout(3) == 0);
    f.queue->EndTimeoutHandling();
  }
  SECTION("End with callbacks left over: they stay due and fire first next time") {
    REQUIRE(f.queue->BeginTimeoutHandling());
    CHECK(f.queue->HandleTimeout(4) == 4);
    f.queue->EndTimeoutHandling();
    CHECK(f.timer.Count() == 4);
    CHECK(f.queue->GetNextTimeout() == 0);
    // A timer that becomes due meanwhile goes after the left-overs.
    f.queue->SetTimer(handles[0], f.timer, 0, 100);
    f.ticks.SetTime(f.FiringTimeFor(0));
    CHECK(f.queue->HandleTimeouts() == 7);
  }
  SECTION("a left-over whose timer is re-set fires twice: old data, then new") {
    REQUIRE(f.queue->BeginTimeoutHandling());
    CHECK(f.queue->HandleTimeout(1) == 1);
    f.queue->EndTimeoutHandling();
    f.queue->SetTimer(handles[9], f.timer, 0, 109);
    f.ticks.SetTime(f.FiringTimeFor(0));
    CHECK(f.queue->HandleTimeouts() == 10);
    CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 109});
  }
  std::vector<UserData> firstTen(f.timer.UserDataInOrder());
  firstTen.resize(10);
  CHECK(firstTen == std::vector<UserData>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  for (TimerHandle& handle : handles) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("a throwing callback loses none of the rest of the batch", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  std::vector<TimerHandle> handles;
  for (UserData i = 0; i < 3; ++i) {
    handles.push_back(f.queue->CreateTimer());
    f.queue->SetTimer(handles.back(), f.timer, 100, i);
  }
  f.timer.OnFire([](UserData userData) {
    if (userData == 1) throw std::runtime_error("callback failed");
  });
  f.ticks.SetTime(f.FiringTimeFor(100));

  SECTION("HandleTimeout: the next call continues after the throwing callback") {
    REQUIRE(f.queue->BeginTimeoutHandling());
    CHECK_THROWS_AS(f.queue->HandleTimeout(), std::runtime_error);
    CHECK(f.queue->HandleTimeout() == 1);
    f.queue->EndTimeoutHandling();
  }
  SECTION("HandleTimeouts: ends the dispatch, the rest stay due") {
    CHECK_THROWS_AS(f.queue->HandleTimeouts(), std::runtime_error);
    CHECK(f.timer.Count() == 2);
    CHECK(f.queue->GetNextTimeout() == 0);
    CHECK(f.queue->HandleTimeouts() == 1);
  }
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{0, 1, 2});
  f.timer.OnFire(nullptr);
  for (TimerHandle& handle : handles) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("Begin, Handle and End out of sequence throw std::logic_error", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  CHECK_THROWS_AS(f.queue->HandleTimeout(), std::logic_error);
  CHECK_THROWS_AS(f.queue->EndTimeoutHandling(), std::logic_error);
  CHECK_FALSE(f.queue->BeginTimeoutHandling());  // nothing due: no dispatch begins
  CHECK_THROWS_AS(f.queue->EndTimeoutHandling(), std::logic_error);

  TimerHandle handle = f.queue->CreateTimer();
  f.queue->SetTimer(handle, f.timer, 0, 1);
  f.ticks.SetTime(f.FiringTimeFor(0));
  REQUIRE(f.queue->BeginTimeoutHandling());
  CHECK_THROWS_AS(f.queue->BeginTimeoutHandling(), std::logic_error);
  CHECK(f.queue->HandleTimeout() == 1);
  f.queue->EndTimeoutHandling();
  CHECK_THROWS_AS(f.queue->EndTimeoutHandling(), std::logic_error);
  CHECK_THROWS_AS(f.queue->HandleTimeout(), std::logic_error);
  f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("a one-shot timer fires once and frees itself", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  const Ticks fireAt = f.FiringTimeFor(100);
  f.queue->SetOneShotTimer(f.timer, 100, 7);
  CHECK(f.monitor.LiveTimers() == 1);
  CHECK(f.queue->GetNextTimeout() == fireAt - f.ticks.Now());
  f.DispatchAt(fireAt - 1);
  CHECK(f.timer.Count() == 0);
  f.DispatchAt(fireAt);
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{7});
  CHECK(f.monitor.LiveTimers() == 0);
  f.DispatchAt(fireAt + 10'000);
  CHECK(f.timer.Count() == 1);
  f.RequireNoLeak();
}

TEMPLATE_TEST_CASE("destroying the queue fires nothing and frees every timer", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  TimerHandle pending = f.queue->CreateTimer();
  TimerHandle unset = f.queue->CreateTimer();
  (void)unset;
  f.queue->SetTimer(pending, f.timer, 100, 1);
  f.queue->SetOneShotTimer(f.timer, 50, 2);

  SECTION("with timers pending") { CHECK(f.monitor.LiveTimers() == 3); }
  SECTION("with expiries detached but not dispatched") {
    f.ticks.SetTime(f.FiringTimeFor(100));
    REQUIRE(f.queue->BeginTimeoutHandling());
    CHECK(f.queue->HandleTimeout(1) == 1);  // the one-shot (earlier) fires and is freed at End
    f.queue->EndTimeoutHandling();          // `pending` is left over, detached
    CHECK(f.monitor.LiveTimers() == 2);
    CHECK(f.queue->GetNextTimeout() == 0);
    f.timer.Clear();
  }
  f.queue.reset();
  CHECK(f.timer.Count() == 0);
  CHECK(f.monitor.LiveTimers() == 0);
}

TEMPLATE_TEST_CASE("timers set before, across and after the 32-bit tick wrap fire on time",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  // All times scale with `span`, so that they fit every implementation's maximum timeout.
  constexpr Milliseconds span =
      TestType::kMaximumTimeout < 20'000 ? TestType::kMaximumTimeout : 20'000;
  // The 32-bit source wraps span / 2 after the test starts.
  ManualWrappingTickSource source(0u - span / 2);
  WrappingTickAdapter ticks(source);
  CountingTimerQueueMonitor monitor;
  auto queue = TestType::Make(ticks, &monitor);
  RecordingTimer timer(ticks);
  const Ticks start = ticks.GetTickCount();

  TimerHandle beforeWrap = queue->CreateTimer();
  TimerHandle acrossWrap = queue->CreateTimer();
  TimerHandle afterWrap = queue->CreateTimer();
  queue->SetTimer(beforeWrap, timer, span / 4, 1);  // fires before the wrap
  queue->SetTimer(acrossWrap, timer, span, 2);      // set before, fires after
  const Ticks firstAt = FiringTime<TestType>(start + span / 4);
  const Ticks secondAt = FiringTime<TestType>(start + span);

  auto advanceTo = [&](Ticks when) {
    source.Advance(static_cast<std::uint32_t>(when - ticks.GetTickCount()));
    queue->HandleTimeouts();
  };
  advanceTo(firstAt);
  CHECK(timer.UserDataInOrder() == std::vector<UserData>{1});
  const Ticks afterWrapAt = start + span * 3 / 4;
  advanceTo(afterWrapAt);
  CHECK(source.GetTickCount32() < span);  // the source has wrapped
  CHECK(ticks.GetTickCount() == afterWrapAt);
  CHECK(queue->GetNextTimeout() == secondAt - afterWrapAt);
  queue->SetTimer(afterWrap, timer, span / 20, 3);  // set and fires after the wrap
  const Ticks thirdAt = FiringTime<TestType>(afterWrapAt + span / 20);
  advanceTo(thirdAt - 1);
  CHECK(timer.Count() == 1);
  advanceTo(thirdAt);
  advanceTo(secondAt - 1);
  CHECK(timer.UserDataInOrder() == std::vector<UserData>{1, 3});
  advanceTo(secondAt);
  CHECK(timer.UserDataInOrder() == std::vector<UserData>{1, 3, 2});

  queue->DestroyTimer(beforeWrap);
  queue->DestroyTimer(acrossWrap);
  queue->DestroyTimer(afterWrap);
  queue->CheckInvariants();
  CHECK(monitor.LiveTimers() == 0);
}

// A callback that ends the dispatch would move the batch from under HandleTimeout's loop (its
// entries ran twice, and the next dispatch's DropFront went past the batch's end): End refuses,
// and every expiry runs once, in order.
TEMPLATE_TEST_CASE("EndTimeoutHandling from a timer callback is refused and changes nothing",
                   "[contract]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  std::vector<TimerHandle> handles;
  for (UserData i = 0; i < 4; ++i) {
    handles.push_back(f.queue->CreateTimer());
    f.queue->SetTimer(handles.back(), f.timer, 0, i);
  }
  int refusals = 0;
  f.timer.OnFire([&](UserData userData) {
    if (userData != 0) return;
    CHECK_THROWS_AS(f.queue->EndTimeoutHandling(), std::logic_error);
    CHECK_THROWS_AS(f.queue->BeginTimeoutHandling(), std::logic_error);
    ++refusals;
  });
  f.ticks.Advance(TestType::kGranularity);
  CHECK(f.queue->HandleTimeouts() == 4);
  CHECK(refusals == 1);
  CHECK(f.timer.UserDataInOrder() == std::vector<UserData>{0, 1, 2, 3});
  f.timer.OnFire(nullptr);
  CHECK(f.queue->HandleTimeouts() == 0);
  f.queue->CheckInvariants();
  for (auto& handle : handles) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}

namespace {
// A clock whose reading fails on demand (ITickProvider::GetTickCount may throw).
struct FailingClock final : ITickProvider {
  Ticks GetTickCount() const override {
    if (fail) throw std::runtime_error("clock failed");
    return 1'000'000'007;
  }
  bool fail = false;
};
}  // namespace

TEMPLATE_TEST_CASE("a one-shot timer whose clock read throws leaves nothing behind", "[contract]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
  FailingClock clock;
  CountingTimerQueueMonitor monitor;
  auto queue = TestType::Make(clock, &monitor);
  RecordingTimer timer{clock};
  clock.fail = true;
  CHECK_THROWS_AS(queue->SetOneShotTimer(timer, 10, 1), std::runtime_error);
  clock.fail = false;
  CHECK_NOTHROW(queue->CheckInvariants());
  CHECK(monitor.LiveTimers() == 0);
  CHECK(queue->GetNextTimeout() == kInfinite);
}
