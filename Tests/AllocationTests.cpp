// Steady-state timer operations allocate nothing: counted with a replaced global operator new
// (Support/AllocationCounter.cpp).
#include <catch2/catch.hpp>
#include <vector>

#include "Support/AllocationCounter.h"
#include "Support/QueueFixture.h"

using namespace timerwheel;
using namespace timerwheel::test;

TEMPLATE_TEST_CASE("set, update, cancel, dispatch, create and destroy allocate nothing once warm",
                   "[contract][allocation]", TIMERWHEEL_ALL_QUEUE_TRAITS) {
  QueueFixture<TestType> f;
  constexpr int kTimers = 1000;
  std::vector<TimerHandle> handles(kTimers);
  for (TimerHandle& handle : handles) handle = f.queue->CreateTimer();

  auto cycle = [&] {
    for (int i = 0; i < kTimers; ++i) {
      f.queue->SetTimer(handles[i], f.timer, static_cast<Milliseconds>(i % 100), i);
      f.queue->UpdateTimer(handles[i], f.timer, 50, i, ITimerQueue::UpdateIf::NewTimeIsSooner);
      if (i % 3 == 0) f.queue->CancelTimer(handles[i]);
      if (i % 7 == 0) f.queue->SetOneShotTimer(f.timer, 10, i);
      if (i % 11 == 0) {
        f.queue->DestroyTimer(handles[i]);
        handles[i] = f.queue->CreateTimer();
      }
    }
    f.ticks.Advance(1000);
    f.queue->HandleTimeouts();
    f.timer.Clear();
  };
  cycle();  // warm-up: pools, heap and batch reach their steady-state capacity
  cycle();
  std::size_t allocations = 0;
  {
    CountAllocations counter;
    for (int round = 0; round < 5; ++round) cycle();
    allocations = counter.Count();
  }
  CHECK(allocations == 0);
  for (TimerHandle& handle : handles) f.queue->DestroyTimer(handle);
  f.RequireNoLeak();
}
