// Steady-state timer operations allocate nothing: counted with a replaced global operator new
// (Support/AllocationCounter.cpp).
#include <array>
#include <catch2/catch.hpp>
#include <new>
#include <vector>

#include "Support/AllocationCounter.h"
#include "Support/QueueFixture.h"
#include "TimerQueue/Detail/HandlerMemory.h"

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

TEST_CASE("HandlerMemory serves as many operations as it reserved for while the heap has none",
          "[allocation][driver]") {
  // What lets an endpoint start a flush or a wait from a destructor (rudp::Endpoint reserves
  // one block per operation it can have outstanding). Fails without the reservation: the first
  // operation then takes its block from the heap. Results are checked once the failure is off,
  // so that the test framework's own allocations cannot take it.
  detail::HandlerMemory memory;
  memory.Reserve(3);
  std::array<void*, 3> blocks{};
  bool heapNeeded = true;
  bool fourthFailed = false;
  {
    FailNthAllocation heapExhausted(1);
    for (void*& block : blocks) block = memory.Allocate(100);
    heapNeeded = heapExhausted.Failed();
    try {
      memory.Deallocate(memory.Allocate(100), 100);  // a fourth at once needs the heap
    } catch (const std::bad_alloc&) {
      fourthFailed = true;
    }
  }
  CHECK_FALSE(heapNeeded);
  CHECK(fourthFailed);
  for (void* block : blocks) memory.Deallocate(block, 100);
  // The blocks are kept: the three are served again without the heap.
  {
    FailNthAllocation heapExhausted(1);
    for (void*& block : blocks) block = memory.Allocate(detail::HandlerMemory::kBlockSize);
    heapNeeded = heapExhausted.Failed();
  }
  CHECK_FALSE(heapNeeded);
  for (void* block : blocks) memory.Deallocate(block, detail::HandlerMemory::kBlockSize);
}

TEST_CASE("HandlerMemory's reservation that fails part way adds no block", "[allocation][driver]") {
  detail::HandlerMemory memory;
  bool reserveFailed = false;
  bool thirdFailed = false;
  {
    FailNthAllocation third(3);
    try {
      memory.Reserve(4);
    } catch (const std::bad_alloc&) {
      reserveFailed = true;
    }
    thirdFailed = third.Failed();
  }
  CHECK(reserveFailed);
  CHECK(thirdFailed);
  // Nothing was added (and the two blocks made before the failure were freed: ASan's leak check),
  // so the first operation goes to the heap.
  bool allocateFailed = false;
  {
    FailNthAllocation heapExhausted(1);
    try {
      memory.Deallocate(memory.Allocate(100), 100);
    } catch (const std::bad_alloc&) {
      allocateFailed = true;
    }
  }
  CHECK(allocateFailed);
}
