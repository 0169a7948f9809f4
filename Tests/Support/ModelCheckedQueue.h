// A timer queue run in lockstep with the reference model (ReferenceModel.h): the one
// model-checking runner behind the randomized differential test (DifferentialTests.cpp, which
// draws operations from a PRNG) and the timer-queue fuzzer (Fuzz/TimerQueueFuzzer.cpp, which
// decodes them from the fuzzer's input).
//
// The runner applies an operation to both and checks that every return value, every firing, its
// user data, its order and its time agree; it owns the queue, the model, the manual clock, the
// monitor and the handles. What to do next is the caller's: it supplies a Chooser with
//
//   void OnFired(ModelCheckedQueue& runner, UserData userData)
//                                             what a callback does once its firing has been
//                                             checked (a mutating operation, throw
//                                             DeliberateCallbackFailure, or nothing)
//   std::size_t DispatchBudget()              the budget of the next HandleTimeout
//   void BetweenHandleCalls(ModelCheckedQueue&)  maybe a mutating operation between two
//                                             HandleTimeout calls (as another thread would)
//   bool EndDispatchEarly()                   whether to End with callbacks still undispatched
//   [[noreturn]] void Fail(const std::string&) report a disagreement (throw, or abort)
//
// Not thread-safe: one thread drives it, as the queues themselves require.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "Support/ManualTickProvider.h"
#include "Support/ReferenceModel.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/IManageTimerQueue.h"
#include "TimerQueue/ITimer.h"
#include "TimerQueue/InvalidTimerHandle.h"

namespace timerwheel::test {

// Thrown by a callback on purpose; Dispatch expects it and carries on.
struct DeliberateCallbackFailure : std::runtime_error {
  DeliberateCallbackFailure() : std::runtime_error("callback failed on purpose") {}
};

template <class Traits, class Chooser>
class ModelCheckedQueue final : public ITimer {
 public:
  using SetIf = ITimerQueue::SetIf;
  using UpdateIf = ITimerQueue::UpdateIf;

  // At most this many live timers: Create beyond it does nothing.
  static constexpr std::size_t kMaximumLive = 300;

  explicit ModelCheckedQueue(Chooser& chooser)
      : m_chooser(chooser),
        m_queue(Traits::Make(m_ticks, &m_monitor)),
        m_model(Traits::kGranularity) {}

  void OnTimer(UserData userData) override {
    const auto expected = m_model.NextToFire();
    Check(expected.has_value(), "fired " + std::to_string(userData) + ", model expects nothing");
    Check(expected->userData == userData, "fired " + std::to_string(userData) + ", model expects " +
                                              std::to_string(expected->userData));
    Check(expected->firingTime <= m_ticks.Now(), "fired early");
    m_chooser.OnFired(*this, userData);
  }

  // --- Operations that change timers: at top level, between dispatch steps and in callbacks.
  // Each counts as one operation. `pick` chooses among the live timers (modulo their number).

  void Create() {
    ++m_operations;
    if (m_live.size() < kMaximumLive) CreateTimer();
  }

  void Destroy(std::uint64_t pick) {
    ++m_operations;
    if (m_live.empty()) return;
    const std::size_t index = pick % m_live.size();
    const std::size_t id = m_live[index];
    TimerHandle handle = m_handles[id];
    const bool wasPending = m_queue->DestroyTimer(handle);
    Check(handle.IsNull(), "DestroyTimer left the handle non-null");
    Check(wasPending == m_model.Destroy(id), "DestroyTimer returned " + std::to_string(wasPending));
    m_stale.push_back(m_handles[id]);
    if (m_stale.size() > 64) m_stale.erase(m_stale.begin());
    m_live[index] = m_live.back();
    m_live.pop_back();
  }

  void Set(std::uint64_t pick, Milliseconds timeout, SetIf setIf) {
    ++m_operations;
    const std::size_t id = LiveTimer(pick);
    const UserData userData = m_nextUserData++;
    const bool wasPending = m_queue->SetTimer(m_handles[id], *this, timeout, userData, setIf);
    Check(wasPending == m_model.Set(id, m_ticks.Now(), timeout, userData, setIf),
          "SetTimer returned " + std::to_string(wasPending));
  }

  void Update(std::uint64_t pick, Milliseconds timeout, UpdateIf updateIf) {
    ++m_operations;
    const std::size_t id = LiveTimer(pick);
    const UserData userData = m_nextUserData++;
    bool updated = false;
    bool modelUpdated = false;
    const bool wasPending =
        m_queue->UpdateTimer(m_handles[id], *this, timeout, userData, updateIf, &updated);
    Check(
        wasPending == m_model.Update(id, m_ticks.Now(), timeout, userData, updateIf, modelUpdated),
        "UpdateTimer returned " + std::to_string(wasPending));
    Check(updated == modelUpdated, "UpdateTimer wasUpdated " + std::to_string(updated));
  }

  void Cancel(std::uint64_t pick) {
    ++m_operations;
    const std::size_t id = LiveTimer(pick);
    Check(m_queue->CancelTimer(m_handles[id]) == m_model.Cancel(id), "CancelTimer return value");
  }

  void OneShot(Milliseconds timeout) {
    ++m_operations;
    const UserData userData = m_nextUserData++;
    m_queue->SetOneShotTimer(*this, timeout, userData);
    m_model.SetOneShot(m_ticks.Now(), timeout, userData);
  }

  void IsSet(std::uint64_t pick) {
    ++m_operations;
    const std::size_t id = LiveTimer(pick);
    Check(m_queue->TimerIsSet(m_handles[id]) == m_model.IsSet(id), "TimerIsSet");
  }

  // A null handle (`which` is 0, or nothing has been destroyed yet) or a recently destroyed one,
  // given to `call` % 5: Set, Cancel, Destroy, Update, TimerIsSet. Each must throw
  // InvalidTimerHandle.
  void BadHandle(std::uint64_t which, unsigned call) {
    ++m_operations;
    const TimerHandle bad =
        m_stale.empty() || which == 0 ? TimerHandle{} : m_stale[which % m_stale.size()];
    call %= 5;
    bool threw = false;
    try {
      switch (call) {
        case 0:
          m_queue->SetTimer(bad, *this, 10, 0);
          break;
        case 1:
          m_queue->CancelTimer(bad);
          break;
        case 2: {
          TimerHandle copy = bad;
          m_queue->DestroyTimer(copy);
          break;
        }
        case 3:
          m_queue->UpdateTimer(bad, *this, 10, 0);
          break;
        default:
          m_queue->TimerIsSet(bad);
          break;
      }
    } catch (const InvalidTimerHandle&) {
      threw = true;
    }
    Check(threw, "a stale or null handle was accepted (call " + std::to_string(call) + ")");
  }

  // The maximum timeout plus 1 + `excess` (at most kInfinite), given to `call` % 3: Set, Update
  // (with `updateIf`), SetOneShotTimer. Each must throw std::out_of_range and change nothing.
  void OverMaximum(std::uint64_t pick, unsigned call, std::uint64_t excess, UpdateIf updateIf) {
    ++m_operations;
    const std::size_t id = LiveTimer(pick);
    call %= 3;
    const auto timeout = static_cast<Milliseconds>(
        std::min<std::uint64_t>(std::uint64_t{Traits::kMaximumTimeout} + 1 + excess, kInfinite));
    bool threw = false;
    try {
      switch (call) {
        case 0:
          m_queue->SetTimer(m_handles[id], *this, timeout, 0);
          break;
        case 1:
          m_queue->UpdateTimer(m_handles[id], *this, timeout, 0, updateIf);
          break;
        default:
          m_queue->SetOneShotTimer(*this, timeout, 0);
          break;
      }
    } catch (const std::out_of_range&) {
      threw = true;
    }
    Check(threw, "a timeout over the maximum was accepted (call " + std::to_string(call) + ")");
    Check(m_queue->TimerIsSet(m_handles[id]) == m_model.IsSet(id), "TimerIsSet after bad timeout");
  }

  // --- Operations on time and dispatch: top level only.

  // GetNextTimeout and GetNextExpiry against the model.
  void CheckNextTimeout() {
    ++m_operations;
    const Ticks now = m_ticks.Now();
    const Milliseconds actual = m_queue->GetNextTimeout();
    const Milliseconds expected = m_model.NextTimeout(now);
    Check(actual == expected,
          "GetNextTimeout " + std::to_string(actual) + ", model " + std::to_string(expected));
    const Ticks expiry = m_queue->GetNextExpiry();
    if (expected == kInfinite) {
      Check(expiry == IManageTimerQueue::kNoExpiry, "GetNextExpiry is set, nothing is");
    } else if (expected == 0) {
      Check(expiry <= now,
            "GetNextExpiry " + std::to_string(expiry) + " is later than now, but something is due");
    } else if (expected < kInfinite - 1) {
      Check(expiry == now + expected, "GetNextExpiry " + std::to_string(expiry) + ", model " +
                                          std::to_string(now + expected));
    } else {
      Check(expiry != IManageTimerQueue::kNoExpiry && expiry >= now + expected,
            "GetNextExpiry earlier than GetNextTimeout says");
    }
  }

  void Advance(Ticks milliseconds) {
    ++m_operations;
    m_ticks.Advance(milliseconds);
  }

  // Advance exactly to the next firing time and dispatch: firing times are then exact.
  void AdvanceToNextAndDispatch() {
    CheckNextTimeout();
    const Milliseconds next = m_queue->GetNextTimeout();
    if (next != kInfinite) m_ticks.Advance(next);
    Dispatch();
  }

  // Begin, then HandleTimeout with the chooser's budgets (and its operations between the calls)
  // until nothing is left or the chooser ends early, then End.
  void Dispatch() {
    ++m_operations;
    const bool began = m_queue->BeginTimeoutHandling();
    Check(began == m_model.Begin(m_ticks.Now()),
          "BeginTimeoutHandling returned " + std::to_string(began));
    if (!began) return;
    for (;;) {
      const std::size_t budget = m_chooser.DispatchBudget();
      std::size_t handled = 0;
      bool threw = false;
      const std::size_t before = m_model.Undispatched();
      try {
        handled = m_queue->HandleTimeout(budget);
      } catch (const DeliberateCallbackFailure&) {
        threw = true;
      }
      if (!threw) {
        Check(handled == before - m_model.Undispatched(), "HandleTimeout count");
        Check(handled == std::min(budget, before), "HandleTimeout stopped early");
      }
      m_chooser.BetweenHandleCalls(*this);
      if (m_model.Undispatched() == 0 || m_chooser.EndDispatchEarly()) break;
    }
    m_queue->EndTimeoutHandling();
    m_model.End();
  }

  void CheckInvariants() {
    ++m_operations;
    m_queue->CheckInvariants();
  }

  // Destroys every timer, lets every one-shot fire (callbacks may create more: repeats until
  // quiet), and checks that nothing is pending or leaked and that the firing counts agree.
  void Finish() {
    DestroyAllLive();
    for (int round = 0; round < 100 && m_queue->GetNextTimeout() != kInfinite; ++round) {
      m_ticks.Advance(Traits::kMaximumTimeout);
      Dispatch();
      DestroyAllLive();
    }
    m_queue->CheckInvariants();
    Check(m_queue->GetNextTimeout() == kInfinite, "timers still pending at the end");
    Check(m_monitor.LiveTimers() == 0, std::to_string(m_monitor.LiveTimers()) + " timers leaked");
    Check(m_monitor.Fired() == m_model.Fired(), "fired counts differ");
  }

  bool HasLiveTimers() const { return !m_live.empty(); }

  // Top-level and nested operations so far.
  std::uint64_t Operations() const { return m_operations; }

 private:
  void Check(bool condition, const std::string& what) const {
    if (!condition) {
      m_chooser.Fail("after " + std::to_string(m_operations) +
                     " operations at t=" + std::to_string(m_ticks.Now()) + ": " + what);
    }
  }

  void CreateTimer() {
    const TimerHandle handle = m_queue->CreateTimer();
    Check(!handle.IsNull(), "CreateTimer returned a null handle");
    const std::size_t id = m_model.Create();
    if (m_handles.size() <= id) m_handles.resize(id + 1);
    m_handles[id] = handle;
    m_live.push_back(id);
  }

  // A live timer (model id), creating one if there is none.
  std::size_t LiveTimer(std::uint64_t pick) {
    if (m_live.empty()) CreateTimer();
    return m_live[pick % m_live.size()];
  }

  void DestroyAllLive() {
    for (std::size_t id : m_live) {
      TimerHandle handle = m_handles[id];
      m_queue->DestroyTimer(handle);
      m_model.Destroy(id);
    }
    m_live.clear();
  }

  Chooser& m_chooser;
  ManualTickProvider m_ticks;
  CountingTimerQueueMonitor m_monitor;
  std::unique_ptr<typename Traits::Queue> m_queue;
  ReferenceModel m_model;
  std::vector<TimerHandle> m_handles;  // by model id
  std::vector<std::size_t> m_live;     // model ids of timers not destroyed
  std::vector<TimerHandle> m_stale;    // recently destroyed handles
  UserData m_nextUserData = 1;
  std::uint64_t m_operations = 0;
};

}  // namespace timerwheel::test
