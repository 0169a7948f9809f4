// The tick providers: the system clock and the 32-bit wrap adapter.
#include <catch2/catch.hpp>
#include <cstdint>
#include <thread>
#include <vector>

#include "Support/ManualTickProvider.h"
#include "TimerQueue/SystemTickProvider.h"
#include "TimerQueue/WrappingTickAdapter.h"

using namespace timerwheel;
using namespace timerwheel::test;

TEST_CASE("the system tick provider is monotonic", "[ticks]") {
  const ITickProvider& ticks = SystemTickProvider::Instance();
  Ticks previous = ticks.GetTickCount();
  CHECK(previous > 0);
  for (int i = 0; i < 100'000; ++i) {
    const Ticks now = ticks.GetTickCount();
    REQUIRE(now >= previous);
    previous = now;
  }
}

TEST_CASE("the wrap adapter extends a 32-bit counter across several wraps", "[ticks]") {
  ManualWrappingTickSource source(0xFFFFFF00u);
  WrappingTickAdapter ticks(source);
  const Ticks start = ticks.GetTickCount();
  CHECK(start == 0xFFFFFF00u);

  source.Advance(0x100);  // exactly onto the wrap
  CHECK(source.GetTickCount32() == 0u);
  CHECK(ticks.GetTickCount() == start + 0x100);

  Ticks expected = start + 0x100;
  for (int wraps = 0; wraps < 3; ++wraps) {
    for (int step = 0; step < 4; ++step) {  // four steps of 2^30 - 1 ms per wrap
      source.Advance(0x3FFFFFFFu);
      expected += 0x3FFFFFFFu;
      REQUIRE(ticks.GetTickCount() == expected);
    }
  }
  CHECK(expected > (Ticks{3} << 32));
}

TEST_CASE("the wrap adapter stays monotonic when many threads read it during a wrap", "[ticks]") {
  ManualWrappingTickSource source(0xFFFFFFFFu - 50'000u);
  WrappingTickAdapter ticks(source);
  const Ticks start = ticks.GetTickCount();
  constexpr int kReaders = 3;
  constexpr int kSteps = 100'000;
  std::vector<std::thread> readers;
  std::vector<int> failures(kReaders, 0);
  std::atomic<bool> done{false};
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      Ticks previous = ticks.GetTickCount();
      while (!done.load(std::memory_order_acquire)) {
        const Ticks now = ticks.GetTickCount();
        if (now < previous || now > start + kSteps) ++failures[r];
        previous = now;
      }
    });
  }
  for (int i = 0; i < kSteps; ++i) source.Advance(1);  // crosses the wrap half-way
  done.store(true, std::memory_order_release);
  for (std::thread& reader : readers) reader.join();
  CHECK(failures == std::vector<int>(kReaders, 0));
  CHECK(ticks.GetTickCount() == start + kSteps);
}
