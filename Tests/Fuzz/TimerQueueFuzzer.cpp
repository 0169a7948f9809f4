// libFuzzer target: the timer queues (TimerQueue, TimerWheel at 15 ms and at 1 ms) driven by an
// operation sequence decoded from the input, each in lockstep with the reference model of the
// differential test (Tests/Support/ReferenceModel.h), on a manual clock. Every return value,
// every firing, its user data, its order and its time must agree with the model, as in
// Tests/DifferentialTests.cpp; at the end every timer is destroyed or fired and nothing may leak.
// Any disagreement aborts. The input format is in TimerQueueOps.h; the interpreter is this file's
// own (DifferentialTests.cpp draws its operations from a PRNG instead).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "FuzzInput.h"
#include "Support/ManualTickProvider.h"
#include "Support/QueueTraits.h"
#include "Support/ReferenceModel.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/InvalidTimerHandle.h"
#include "TimerQueueOps.h"

using namespace timerwheel;
using namespace timerwheel::test;
using timerwheel::fuzz::FuzzInput;
using timerwheel::fuzz::TimerOp;

namespace {

// Thrown by a callback on purpose; the dispatch loop expects it.
struct CallbackFailure {};

template <class Traits>
class Lane final : public ITimer {
 public:
  using SetIf = ITimerQueue::SetIf;
  using UpdateIf = ITimerQueue::UpdateIf;

  Lane(const char* name, const std::uint8_t* data, std::size_t size)
      : m_name(name),
        m_input(data, size),
        m_queue(Traits::Make(m_ticks, &m_monitor)),
        m_model(Traits::kGranularity) {}

  void Run() {
    while (!m_input.Empty()) TopLevelOperation();
    Finish();
  }

  void OnTimer(UserData userData) override {
    const auto expected = m_model.NextToFire();
    Check(expected.has_value(), "fired " + std::to_string(userData) + ", model expects nothing");
    Check(expected->userData == userData, "fired " + std::to_string(userData) + ", model expects " +
                                              std::to_string(expected->userData));
    Check(expected->firingTime <= m_ticks.Now(), "fired early");
    const unsigned action = m_input.Byte() % 100u;
    if (action >= 1 && action < 30) {
      MutatingOperation(static_cast<TimerOp>(m_input.Byte() % fuzz::kTimerOpCount));
    } else if (action == 30 || action == 31) {
      throw CallbackFailure{};
    }
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    const std::string message = std::string(m_name) + " after " + std::to_string(m_operations) +
                                " operations at t=" + std::to_string(m_ticks.Now()) + ": " + what;
    fuzz::Fail(message.c_str());
  }
  void Check(bool condition, const std::string& what) const {
    if (!condition) Fail(what);
  }

  Milliseconds Timeout() {
    constexpr Milliseconds maximum = Traits::kMaximumTimeout;
    constexpr Milliseconds granularity = Traits::kGranularity;
    switch (m_input.Byte() % 8) {
      case 0:
        return 0;
      case 1:
        return static_cast<Milliseconds>(m_input.Byte() % (5 * granularity));
      case 2:
        return maximum;
      case 3:
        return static_cast<Milliseconds>(m_input.U16() %
                                         (std::min<Milliseconds>(maximum, 5000) + 1));
      case 4:
        return static_cast<Milliseconds>(m_input.U32() %
                                         (std::min<Milliseconds>(maximum, 100'000) + 1));
      case 5:
        return maximum -
               static_cast<Milliseconds>(m_input.Byte() % std::min<Milliseconds>(maximum, 100));
      case 6:
        return static_cast<Milliseconds>(m_input.U32() % (std::uint64_t{maximum} + 1));
      default:
        return std::min<Milliseconds>(maximum, granularity * m_input.Byte());
    }
  }

  // A live timer (model id), creating one if there is none.
  std::size_t Timer() {
    if (m_live.empty()) Create();
    return m_live[m_input.Byte() % m_live.size()];
  }

  void Create() {
    const TimerHandle handle = m_queue->CreateTimer();
    Check(!handle.IsNull(), "CreateTimer returned a null handle");
    const std::size_t id = m_model.Create();
    if (m_handles.size() <= id) m_handles.resize(id + 1);
    m_handles[id] = handle;
    m_live.push_back(id);
  }

  void CheckNextTimeout() {
    const Ticks now = m_ticks.Now();
    const Milliseconds actual = m_queue->GetNextTimeout();
    const Milliseconds expected = m_model.NextTimeout(now);
    Check(actual == expected,
          "GetNextTimeout " + std::to_string(actual) + ", model " + std::to_string(expected));
    const Ticks expiry = m_queue->GetNextExpiry();
    if (expected == kInfinite) {
      Check(expiry == IManageTimerQueue::kNoExpiry, "GetNextExpiry is set, nothing is");
    } else if (expected == 0) {
      Check(expiry <= now, "GetNextExpiry " + std::to_string(expiry) +
                               " is later than now, but "
                               "something is due");
    } else if (expected < kInfinite - 1) {
      Check(expiry == now + expected, "GetNextExpiry " + std::to_string(expiry) + ", model " +
                                          std::to_string(now + expected));
    } else {
      Check(expiry != IManageTimerQueue::kNoExpiry && expiry >= now + expected,
            "GetNextExpiry earlier than GetNextTimeout says");
    }
  }

  // Operations that change timers: at top level, between dispatch steps and in callbacks.
  void MutatingOperation(TimerOp op) {
    ++m_operations;
    const Ticks now = m_ticks.Now();
    switch (op) {
      case TimerOp::Create:
        if (m_live.size() < 300) Create();
        break;
      case TimerOp::Destroy: {
        if (m_live.empty()) break;
        const std::size_t index = m_input.Byte() % m_live.size();
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
        break;
      }
      case TimerOp::Set: {
        const std::size_t id = Timer();
        const Milliseconds timeout = Timeout();
        const SetIf setIf = m_input.Bool() ? SetIf::NotSet : SetIf::Always;
        const UserData userData = m_nextUserData++;
        const bool wasPending = m_queue->SetTimer(m_handles[id], *this, timeout, userData, setIf);
        Check(wasPending == m_model.Set(id, now, timeout, userData, setIf),
              "SetTimer returned " + std::to_string(wasPending));
        break;
      }
      case TimerOp::Update: {
        const std::size_t id = Timer();
        const Milliseconds timeout = Timeout();
        const auto updateIf = static_cast<UpdateIf>(m_input.Byte() % 4);
        const UserData userData = m_nextUserData++;
        bool updated = false;
        bool modelUpdated = false;
        const bool wasPending =
            m_queue->UpdateTimer(m_handles[id], *this, timeout, userData, updateIf, &updated);
        Check(wasPending == m_model.Update(id, now, timeout, userData, updateIf, modelUpdated),
              "UpdateTimer returned " + std::to_string(wasPending));
        Check(updated == modelUpdated, "UpdateTimer wasUpdated " + std::to_string(updated));
        break;
      }
      case TimerOp::Cancel: {
        const std::size_t id = Timer();
        Check(m_queue->CancelTimer(m_handles[id]) == m_model.Cancel(id),
              "CancelTimer return value");
        break;
      }
      case TimerOp::OneShot: {
        const Milliseconds timeout = Timeout();
        const UserData userData = m_nextUserData++;
        m_queue->SetOneShotTimer(*this, timeout, userData);
        m_model.SetOneShot(now, timeout, userData);
        break;
      }
      case TimerOp::IsSet: {
        const std::size_t id = Timer();
        Check(m_queue->TimerIsSet(m_handles[id]) == m_model.IsSet(id), "TimerIsSet");
        break;
      }
      case TimerOp::BadHandle:
        BadHandleOperation();
        break;
      case TimerOp::OverMaximum:
        OverMaximumOperation();
        break;
      default:
        break;  // not a mutating operation: ignored here (callbacks and between dispatch steps)
    }
  }

  void BadHandleOperation() {
    const std::uint8_t which = m_input.Byte();
    const TimerHandle bad =
        m_stale.empty() || which == 0 ? TimerHandle{} : m_stale[which % m_stale.size()];
    const unsigned call = m_input.Byte() % 5u;
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

  // A timeout over the maximum: rejected with out_of_range, and nothing changes.
  void OverMaximumOperation() {
    const std::size_t id = Timer();
    const unsigned call = m_input.Byte() % 3u;
    const std::uint64_t excess = m_input.U32();
    const auto timeout = static_cast<Milliseconds>(
        std::min<std::uint64_t>(std::uint64_t{Traits::kMaximumTimeout} + 1 + excess, kInfinite));
    const auto updateIf = static_cast<UpdateIf>(m_input.Byte() % 4);
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

  void Dispatch() {
    const bool began = m_queue->BeginTimeoutHandling();
    Check(began == m_model.Begin(m_ticks.Now()),
          "BeginTimeoutHandling returned " + std::to_string(began));
    if (!began) return;
    for (;;) {
      const std::uint8_t budgetByte = m_input.Byte();
      const std::size_t budget = budgetByte == 0 ? SIZE_MAX : 1 + budgetByte % 6u;
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
      if (m_input.Byte() % 3 == 1) {
        MutatingOperation(static_cast<TimerOp>(m_input.Byte() % fuzz::kTimerOpCount));
      }
      if (m_model.Undispatched() == 0 || m_input.Byte() % 5 == 0) break;  // End, maybe early
    }
    m_queue->EndTimeoutHandling();
    m_model.End();
  }

  void TopLevelOperation() {
    const auto op = static_cast<TimerOp>(m_input.Byte() % fuzz::kTimerOpCount);
    switch (op) {
      case TimerOp::NextTimeout:
        ++m_operations;
        CheckNextTimeout();
        break;
      case TimerOp::AdvanceSmall:
        ++m_operations;
        m_ticks.Advance(m_input.Byte() % (3 * Traits::kGranularity + 1));
        break;
      case TimerOp::AdvanceToNextAndDispatch: {
        // Advance exactly to the next firing time and dispatch: firing times are then exact.
        ++m_operations;
        CheckNextTimeout();
        const Milliseconds next = m_queue->GetNextTimeout();
        if (next != kInfinite) m_ticks.Advance(next);
        Dispatch();
        break;
      }
      case TimerOp::Dispatch:
        ++m_operations;
        Dispatch();
        break;
      case TimerOp::LongGap: {
        // A long gap without dispatch: up to several revolutions of a wheel, or days.
        ++m_operations;
        const bool days = m_input.Byte() % 10 == 0;
        const std::uint64_t raw = m_input.U64();
        m_ticks.Advance(days ? raw % (50ull * 24 * 3600 * 1000)
                             : raw % (3ull * Traits::kMaximumTimeout));
        break;
      }
      case TimerOp::CheckInvariants:
        ++m_operations;
        m_queue->CheckInvariants();
        break;
      default:
        MutatingOperation(op);
        break;
    }
  }

  void Finish() {
    for (std::size_t id : m_live) {
      TimerHandle handle = m_handles[id];
      m_queue->DestroyTimer(handle);
      m_model.Destroy(id);
    }
    m_live.clear();
    // Let every one-shot fire (the input is used up: callbacks only check, Dispatch runs all).
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

  const char* m_name;
  FuzzInput m_input;
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

template <class Traits>
void RunLane(const char* name, const std::uint8_t* data, std::size_t size) {
  try {
    Lane<Traits> lane(name, data, size);
    lane.Run();
  } catch (const std::exception& error) {
    const std::string what = std::string(name) + ": unexpected exception: " + error.what();
    fuzz::Fail(what.c_str());
  } catch (const CallbackFailure&) {
    fuzz::Fail((std::string(name) + ": a callback's exception escaped a dispatch").c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RunLane<HeapTraits>("TimerQueue (heap)", data, size);
  RunLane<WheelTraits>("TimerWheel (15 ms)", data, size);
  RunLane<FineWheelTraits>("TimerWheel (1 ms)", data, size);
  return 0;
}
