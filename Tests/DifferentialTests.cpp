// A long random sequence of operations (create, set, update, cancel, destroy, one-shot, advance,
// dispatch with budgets and left-overs, bad input, and operations from inside callbacks) applied
// to an implementation and to the reference model in lockstep: every return value, every firing,
// its user data and the time it fired must agree.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "Support/ManualTickProvider.h"
#include "Support/QueueTraits.h"
#include "Support/ReferenceModel.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"

using namespace timerwheel;
using namespace timerwheel::test;

namespace {

// Thrown by a callback on purpose; the dispatch loop expects it.
struct CallbackFailure : std::runtime_error {
  CallbackFailure() : std::runtime_error("callback failed on purpose") {}
};

template <class Traits>
class DifferentialRun final : public ITimer {
 public:
  using SetIf = ITimerQueue::SetIf;
  using UpdateIf = ITimerQueue::UpdateIf;

  explicit DifferentialRun(std::uint64_t seed)
      : m_queue(Traits::Make(m_ticks, &m_monitor)), m_model(Traits::kGranularity), m_random(seed) {}

  // Runs `operations` top-level operations (callbacks add more); returns how many ran in all.
  std::uint64_t Run(std::uint64_t operations) {
    for (std::uint64_t i = 0; i < operations; ++i) {
      TopLevelOperation();
      if (i % 1009 == 0) m_queue->CheckInvariants();
    }
    Finish();
    return m_operations;
  }

  void OnTimer(UserData userData) override {
    const auto expected = m_model.NextToFire();
    Check(expected.has_value(),
          "fired " + std::to_string(userData) + " but the model expects nothing");
    Check(expected->userData == userData, "fired " + std::to_string(userData) + ", model expects " +
                                              std::to_string(expected->userData));
    Check(expected->firingTime <= m_ticks.Now(), "fired early");
    // What the callback does is a function of its user data, so it is the same on every run.
    std::mt19937_64 local(userData * 0x9E3779B97F4A7C15ull);
    const auto choice = local() % 100;
    if (choice < 30) {
      MutatingOperation(local);
    } else if (choice < 32) {
      throw CallbackFailure();
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::logic_error("after " + std::to_string(m_operations) +
                           " operations at t=" + std::to_string(m_ticks.Now()) + ": " + what);
  }
  void Check(bool condition, const std::string& what) const {
    if (!condition) Fail(what);
  }

  template <class Random>
  static std::uint64_t Below(Random& random, std::uint64_t bound) {
    return random() % bound;
  }

  template <class Random>
  Milliseconds RandomTimeout(Random& random) {
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

  // A live timer (model id), creating one if there is none.
  template <class Random>
  std::size_t RandomTimer(Random& random) {
    if (m_live.empty()) Create();
    return m_live[Below(random, m_live.size())];
  }

  void Create() {
    const TimerHandle handle = m_queue->CreateTimer();
    const std::size_t id = m_model.Create();
    if (m_handles.size() <= id) m_handles.resize(id + 1);
    m_handles[id] = handle;
    m_live.push_back(id);
  }

  // Operations that change timers: allowed at top level, during a dispatch and in callbacks.
  template <class Random>
  void MutatingOperation(Random& random) {
    ++m_operations;
    const Ticks now = m_ticks.Now();
    const auto choice = Below(random, 100);
    if (choice < 8) {
      if (m_live.size() < 300) Create();
    } else if (choice < 14) {
      if (m_live.empty()) return;
      const std::size_t index = Below(random, m_live.size());
      const std::size_t id = m_live[index];
      TimerHandle handle = m_handles[id];
      const bool wasPending = m_queue->DestroyTimer(handle);
      Check(handle.IsNull(), "DestroyTimer left the handle non-null");
      Check(wasPending == m_model.Destroy(id),
            "DestroyTimer returned " + std::to_string(wasPending));
      m_stale.push_back(m_handles[id]);
      if (m_stale.size() > 64) m_stale.erase(m_stale.begin());
      m_live[index] = m_live.back();
      m_live.pop_back();
    } else if (choice < 44) {
      const std::size_t id = RandomTimer(random);
      const Milliseconds timeout = RandomTimeout(random);
      const SetIf setIf = Below(random, 4) == 0 ? SetIf::NotSet : SetIf::Always;
      const UserData userData = m_nextUserData++;
      const bool wasPending = m_queue->SetTimer(m_handles[id], *this, timeout, userData, setIf);
      Check(wasPending == m_model.Set(id, now, timeout, userData, setIf), "SetTimer return value");
    } else if (choice < 66) {
      const std::size_t id = RandomTimer(random);
      const Milliseconds timeout = RandomTimeout(random);
      const auto updateIf = static_cast<UpdateIf>(Below(random, 4));
      const UserData userData = m_nextUserData++;
      bool updated = false;
      bool modelUpdated = false;
      const bool wasPending =
          m_queue->UpdateTimer(m_handles[id], *this, timeout, userData, updateIf, &updated);
      Check(wasPending == m_model.Update(id, now, timeout, userData, updateIf, modelUpdated),
            "UpdateTimer return value");
      Check(updated == modelUpdated, "UpdateTimer wasUpdated");
    } else if (choice < 82) {
      const std::size_t id = RandomTimer(random);
      Check(m_queue->CancelTimer(m_handles[id]) == m_model.Cancel(id), "CancelTimer return value");
    } else if (choice < 88) {
      const Milliseconds timeout = RandomTimeout(random);
      const UserData userData = m_nextUserData++;
      m_queue->SetOneShotTimer(*this, timeout, userData);
      m_model.SetOneShot(now, timeout, userData);
    } else if (choice < 93) {
      const std::size_t id = RandomTimer(random);
      Check(m_queue->TimerIsSet(m_handles[id]) == m_model.IsSet(id), "TimerIsSet");
    } else if (choice < 97) {
      BadHandleOperation(random);
    } else {
      // One over the maximum: rejected, and nothing changes (the model is not told).
      const std::size_t id = RandomTimer(random);
      bool threw = false;
      try {
        m_queue->SetTimer(m_handles[id], *this, Traits::kMaximumTimeout + 1, 0);
      } catch (const std::out_of_range&) {
        threw = true;
      }
      Check(threw, "a timeout over the maximum was accepted");
      Check(m_queue->TimerIsSet(m_handles[id]) == m_model.IsSet(id),
            "TimerIsSet after bad timeout");
    }
  }

  template <class Random>
  void BadHandleOperation(Random& random) {
    TimerHandle bad = m_stale.empty() || Below(random, 4) == 0
                          ? TimerHandle{}
                          : m_stale[Below(random, m_stale.size())];
    bool threw = false;
    try {
      switch (Below(random, 4)) {
        case 0:
          m_queue->SetTimer(bad, *this, 10, 0);
          break;
        case 1:
          m_queue->CancelTimer(bad);
          break;
        case 2:
          m_queue->DestroyTimer(bad);
          break;
        default:
          m_queue->UpdateTimer(bad, *this, 10, 0);
          break;
      }
    } catch (const InvalidTimerHandle&) {
      threw = true;
    }
    Check(threw, "a stale or null handle was accepted");
  }

  void CheckNextTimeout() {
    const Milliseconds actual = m_queue->GetNextTimeout();
    const Milliseconds expected = m_model.NextTimeout(m_ticks.Now());
    Check(actual == expected,
          "GetNextTimeout " + std::to_string(actual) + ", model " + std::to_string(expected));
  }

  void Dispatch() {
    const bool began = m_queue->BeginTimeoutHandling();
    Check(began == m_model.Begin(m_ticks.Now()), "BeginTimeoutHandling return value");
    if (!began) return;
    for (;;) {
      const auto budgetChoice = Below(m_random, 4);
      const std::size_t budget =
          budgetChoice == 0 ? SIZE_MAX : static_cast<std::size_t>(1 + Below(m_random, 6));
      std::size_t handled = 0;
      bool threw = false;
      const std::size_t before = m_model.Undispatched();
      try {
        handled = m_queue->HandleTimeout(budget);
      } catch (const CallbackFailure&) {
        threw = true;
      }
      if (!threw) {
        Check(handled == before - m_model.Undispatched(), "HandleTimeout count");
        Check(handled == std::min(budget, before), "HandleTimeout stopped early");
      }
      // Other threads (or the driver) may change timers between Handle calls.
      if (Below(m_random, 3) == 0) MutatingOperation(m_random);
      if (m_model.Undispatched() == 0 || Below(m_random, 5) == 0) break;  // End, maybe early
    }
    m_queue->EndTimeoutHandling();
    m_model.End();
  }

  void TopLevelOperation() {
    const auto choice = Below(m_random, 100);
    if (choice < 60) {
      MutatingOperation(m_random);
    } else if (choice < 70) {
      ++m_operations;
      CheckNextTimeout();
    } else if (choice < 78) {
      ++m_operations;
      m_ticks.Advance(Below(m_random, 3 * Traits::kGranularity + 1));
    } else if (choice < 90) {
      // Advance exactly to the next firing time and dispatch: firing times are then exact.
      ++m_operations;
      CheckNextTimeout();
      const Milliseconds next = m_queue->GetNextTimeout();
      if (next != kInfinite) m_ticks.Advance(next);
      Dispatch();
    } else if (choice < 98) {
      ++m_operations;
      Dispatch();
    } else {
      // A long gap without dispatch: up to several revolutions of a wheel, or days.
      ++m_operations;
      const Ticks gap = Below(m_random, 10) == 0 ? Below(m_random, 50ull * 24 * 3600 * 1000)
                                                 : Below(m_random, 3ull * Traits::kMaximumTimeout);
      m_ticks.Advance(gap);
    }
  }

  void Finish() {
    for (std::size_t id : m_live) {
      TimerHandle handle = m_handles[id];
      m_queue->DestroyTimer(handle);
      m_model.Destroy(id);
    }
    m_live.clear();
    // Let every one-shot fire (callbacks may still create timers: repeat until quiet).
    for (int round = 0; round < 100 && m_queue->GetNextTimeout() != kInfinite; ++round) {
      m_ticks.Advance(Traits::kMaximumTimeout);
      Dispatch();
      for (std::size_t id : m_live) {
        TimerHandle handle = m_handles[id];
        m_queue->DestroyTimer(handle);
      }
      m_live.clear();
    }
    m_queue->CheckInvariants();
    Check(m_queue->GetNextTimeout() == kInfinite, "timers still pending at the end");
    Check(m_monitor.LiveTimers() == 0, std::to_string(m_monitor.LiveTimers()) + " timers leaked");
    Check(m_monitor.Fired() == m_model.Fired(), "fired counts differ");
  }

  ManualTickProvider m_ticks;
  CountingTimerQueueMonitor m_monitor;
  std::unique_ptr<typename Traits::Queue> m_queue;
  ReferenceModel m_model;
  std::mt19937_64 m_random;
  std::vector<TimerHandle> m_handles;  // by model id
  std::vector<std::size_t> m_live;     // model ids of timers not destroyed
  std::vector<TimerHandle> m_stale;    // recently destroyed handles
  UserData m_nextUserData = 1;
  std::uint64_t m_operations = 0;
};

}  // namespace

TEMPLATE_TEST_CASE("randomized differential test against the reference model", "[differential]",
                   TIMERWHEEL_ALL_QUEUE_TRAITS) {
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
