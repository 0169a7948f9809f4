// A long random sequence of operations (create, set, update, cancel, destroy, one-shot, advance,
// dispatch with budgets and left-overs, bad input, and operations from inside callbacks) applied
// to an implementation and to the reference model in lockstep: every return value, every firing,
// its user data and the time it fired must agree. The runner is Support/ModelCheckedQueue.h,
// shared with the fuzzer Fuzz/TimerQueueFuzzer.cpp, which decodes its operations from the input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "Support/ModelCheckedQueue.h"
#include "Support/QueueTraits.h"

using namespace timerwheel;
using namespace timerwheel::test;

namespace {

// Chooses the operations from a PRNG; the runner (Support/ModelCheckedQueue.h) applies them to
// the queue and the model and checks that they agree.
template <class Traits>
class DifferentialRun {
 public:
  using Runner = ModelCheckedQueue<Traits, DifferentialRun>;
  using SetIf = ITimerQueue::SetIf;
  using UpdateIf = ITimerQueue::UpdateIf;

  explicit DifferentialRun(std::uint64_t seed) : m_random(seed), m_runner(*this) {}

  // Runs `operations` top-level operations (callbacks add more); returns how many ran in all.
  std::uint64_t Run(std::uint64_t operations) {
    for (std::uint64_t i = 0; i < operations; ++i) {
      TopLevelOperation();
      if (i % 1009 == 0) m_runner.CheckInvariants();
    }
    m_runner.Finish();
    return m_runner.Operations();
  }

  // --- The runner's chooser.

  void OnFired(Runner& runner, UserData userData) {
    // What the callback does is a function of its user data, so it is the same on every run.
    std::mt19937_64 local(userData * 0x9E3779B97F4A7C15ull);
    const auto choice = local() % 100;
    if (choice < 30) {
      MutatingOperation(runner, local);
    } else if (choice < 32) {
      throw DeliberateCallbackFailure();
    }
  }
  std::size_t DispatchBudget() {
    return Below(m_random, 4) == 0 ? SIZE_MAX : static_cast<std::size_t>(1 + Below(m_random, 6));
  }
  // Other threads (or the driver) may change timers between Handle calls.
  void BetweenHandleCalls(Runner& runner) {
    if (Below(m_random, 3) == 0) MutatingOperation(runner, m_random);
  }
  bool EndDispatchEarly() { return Below(m_random, 5) == 0; }
  [[noreturn]] void Fail(const std::string& what) const { throw std::logic_error(what); }

 private:
  template <class Random>
  static std::uint64_t Below(Random& random, std::uint64_t bound) {
    return random() % bound;
  }

  template <class Random>
  static Milliseconds RandomTimeout(Random& random) {
    const Milliseconds maximum = Traits::kMaximumTimeout;
    switch (Below(random, 6)) {
      case 0:
        return 0;
      case 1:
        return static_cast<Milliseconds>(Below(random, 5 * Traits::kGranularity));
      case 2:
        return maximum;
      case 3:
        return static_cast<Milliseconds>(Below(random, std::min<Milliseconds>(maximum, 5000) + 1));
      default:
        return static_cast<Milliseconds>(
            Below(random, std::min<Milliseconds>(maximum, 100'000) + 1));
    }
  }

  // Operations that change timers: allowed at top level, during a dispatch and in callbacks.
  template <class Random>
  static void MutatingOperation(Runner& runner, Random& random) {
    const auto choice = Below(random, 100);
    if (choice < 8) {
      runner.Create();
    } else if (choice < 14) {
      runner.Destroy(random());
    } else if (choice < 44) {
      const auto pick = random();
      const Milliseconds timeout = RandomTimeout(random);
      runner.Set(pick, timeout, Below(random, 4) == 0 ? SetIf::NotSet : SetIf::Always);
    } else if (choice < 66) {
      const auto pick = random();
      const Milliseconds timeout = RandomTimeout(random);
      runner.Update(pick, timeout, static_cast<UpdateIf>(Below(random, 4)));
    } else if (choice < 82) {
      runner.Cancel(random());
    } else if (choice < 88) {
      runner.OneShot(RandomTimeout(random));
    } else if (choice < 93) {
      runner.IsSet(random());
    } else if (choice < 97) {
      const std::uint64_t which = Below(random, 4) == 0 ? 0 : 1 + Below(random, 64);
      runner.BadHandle(which, static_cast<unsigned>(Below(random, 5)));
    } else {
      // One over the maximum: rejected, and nothing changes (the model is not told).
      runner.OverMaximum(random(), 0, 0, UpdateIf::Always);
    }
  }

  void TopLevelOperation() {
    const auto choice = Below(m_random, 100);
    if (choice < 60) {
      MutatingOperation(m_runner, m_random);
    } else if (choice < 70) {
      m_runner.CheckNextTimeout();
    } else if (choice < 78) {
      m_runner.Advance(Below(m_random, 3 * Traits::kGranularity + 1));
    } else if (choice < 90) {
      m_runner.AdvanceToNextAndDispatch();
    } else if (choice < 98) {
      m_runner.Dispatch();
    } else {
      // A long gap without dispatch: up to several revolutions of a wheel, or days.
      const Ticks gap = Below(m_random, 10) == 0 ? Below(m_random, 50ull * 24 * 3600 * 1000)
                                                 : Below(m_random, 3ull * Traits::kMaximumTimeout);
      m_runner.Advance(gap);
    }
  }

  std::mt19937_64 m_random;
  Runner m_runner;  // after m_random: it uses this chooser from construction on
};

}  // namespace

TEMPLATE_TEST_CASE("randomized differential test against the reference model", "[differential]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS, timerwheel::test::TightWheelTraits) {
#if defined(__SANITIZE_THREAD__)
  // Single-threaded: ThreadSanitizer has nothing to find here and runs it ten times slower. The
  // other configurations run the full million operations.
  constexpr std::uint64_t kSeeds = 2;
  constexpr std::uint64_t kMinimumOperations = 100'000;
#else
  constexpr std::uint64_t kSeeds = 20;
  constexpr std::uint64_t kMinimumOperations = 1'000'000;
#endif
  constexpr std::uint64_t kOperationsPerSeed = 50'000;
  std::uint64_t total = 0;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    CAPTURE(seed);
    DifferentialRun<TestType> run(seed);
    std::uint64_t operations = 0;
    REQUIRE_NOTHROW(operations = run.Run(kOperationsPerSeed));
    total += operations;
  }
  CHECK(total >= kMinimumOperations);
}
