// Steady-state operations allocate nothing: counted with a replaced global operator new.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <vector>

#include "Support/QueueFixture.h"

namespace {
// Counts allocations made by the current thread while counting is switched on.
thread_local bool t_counting = false;
thread_local std::size_t t_allocations = 0;

class CountAllocations {
 public:
  CountAllocations() {
    t_allocations = 0;
    t_counting = true;
  }
  ~CountAllocations() { t_counting = false; }
  std::size_t Count() const { return t_allocations; }
};
}  // namespace

// GCC cannot see that these replace the global pair, and warns that free() is given a pointer
// from operator new.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// The whole non-aligned family is replaced, so every new is paired with a matching delete.
namespace {
void* Allocate(std::size_t size) noexcept {
  if (t_counting) ++t_allocations;
  return std::malloc(size ? size : 1);
}
void* AllocateOrThrow(std::size_t size) {
  if (void* p = Allocate(size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) { return AllocateOrThrow(size); }
void* operator new[](std::size_t size) { return AllocateOrThrow(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return Allocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return Allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

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
