// The record pool's handle generations: a slot whose generation has run out is retired.
#include <catch2/catch.hpp>

#include "TimerQueue/Core/TimerPool.h"

using namespace timerwheel;
using namespace timerwheel::detail;

TEST_CASE("a slot whose generation has run out is retired, not wrapped", "[pool]") {
  struct Node {};
  TimerPool<Node> pool;
  const std::uint32_t id = pool.Allocate();
  pool[id].generation = kLastGeneration - 1;  // as after 2^32 - 2 reuses
  const TimerHandle beforeLast = pool.HandleOf(id);

  pool.Free(id);
  CHECK(pool.Allocate() == id);  // still reused: one generation left
  const TimerHandle last = pool.HandleOf(id);
  CHECK(last.Generation() == kLastGeneration);
  CHECK_THROWS_AS(pool.IdOf(beforeLast), InvalidTimerHandle);

  pool.Free(id);
  const std::uint32_t next = pool.Allocate();
  CHECK(next != id);  // retired: never handed out again
  CHECK_THROWS_AS(pool.IdOf(last), InvalidTimerHandle);
  CHECK_THROWS_AS(pool.IdOf(beforeLast), InvalidTimerHandle);
  CHECK(pool.IdOf(pool.HandleOf(next)) == next);
}
