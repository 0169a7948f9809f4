// libFuzzer target: the timer queues (TimerQueue, TimerWheel at 15 ms and at 1 ms) driven by an
// operation sequence decoded from the input, each in lockstep with the reference model of the
// differential test (Tests/Support/ReferenceModel.h), on a manual clock. Every return value,
// every firing, its user data, its order and its time must agree with the model, as in
// Tests/DifferentialTests.cpp; at the end every timer is destroyed or fired and nothing may leak.
// Any disagreement aborts. The input format is in TimerQueueOps.h; the model-checking runner,
// Support/ModelCheckedQueue.h, is shared with DifferentialTests.cpp (which draws its operations
// from a PRNG instead).
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
#include "Support/ModelCheckedQueue.h"
#include "Support/QueueTraits.h"
#include "TimerQueueOps.h"

using namespace timerwheel;
using namespace timerwheel::test;
using timerwheel::fuzz::FuzzInput;
using timerwheel::fuzz::TimerOp;

namespace {

// Decodes the operations from the input (the format is in TimerQueueOps.h); the runner
// (Support/ModelCheckedQueue.h) applies them to the queue and the model and checks that they
// agree. Each lane reads the input on its own: callbacks read bytes too, and the implementations
// fire at different times.
template <class Traits>
class Lane {
 public:
  using Runner = ModelCheckedQueue<Traits, Lane>;
  using SetIf = ITimerQueue::SetIf;
  using UpdateIf = ITimerQueue::UpdateIf;

  Lane(const char* name, const std::uint8_t* data, std::size_t size)
      : m_name(name), m_input(data, size), m_runner(*this) {}

  void Run() {
    while (!m_input.Empty()) TopLevelOperation();
    m_runner.Finish();  // the input is used up: callbacks only check, Dispatch runs everything
  }

  // --- The runner's chooser.

  void OnFired(Runner& runner, UserData /*userData*/) {
    const unsigned action = m_input.Byte() % 100u;
    if (action >= 1 && action < 30) {
      MutatingOperation(runner, static_cast<TimerOp>(m_input.Byte() % fuzz::kTimerOpCount));
    } else if (action == 30 || action == 31) {
      throw DeliberateCallbackFailure();
    }
  }
  std::size_t DispatchBudget() {
    const std::uint8_t budgetByte = m_input.Byte();
    return budgetByte == 0 ? SIZE_MAX : 1 + budgetByte % 6u;
  }
  // Other threads (or the driver) may change timers between Handle calls.
  void BetweenHandleCalls(Runner& runner) {
    if (m_input.Byte() % 3 == 1) {
      MutatingOperation(runner, static_cast<TimerOp>(m_input.Byte() % fuzz::kTimerOpCount));
    }
  }
  bool EndDispatchEarly() { return m_input.Byte() % 5 == 0; }
  [[noreturn]] void Fail(const std::string& what) const {
    fuzz::Fail((std::string(m_name) + " " + what).c_str());
  }

 private:
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

  // Operations that change timers: at top level, between dispatch steps and in callbacks. The
  // arguments are read in the order TimerQueueOps.h gives (hence the locals).
  void MutatingOperation(Runner& runner, TimerOp op) {
    switch (op) {
      case TimerOp::Create:
        runner.Create();
        break;
      case TimerOp::Destroy:  // reads its byte only when there is a timer to destroy
        runner.Destroy(runner.HasLiveTimers() ? m_input.Byte() : 0);
        break;
      case TimerOp::Set: {
        const std::uint8_t pick = m_input.Byte();
        const Milliseconds timeout = Timeout();
        runner.Set(pick, timeout, m_input.Bool() ? SetIf::NotSet : SetIf::Always);
        break;
      }
      case TimerOp::Update: {
        const std::uint8_t pick = m_input.Byte();
        const Milliseconds timeout = Timeout();
        runner.Update(pick, timeout, static_cast<UpdateIf>(m_input.Byte() % 4));
        break;
      }
      case TimerOp::Cancel:
        runner.Cancel(m_input.Byte());
        break;
      case TimerOp::OneShot:
        runner.OneShot(Timeout());
        break;
      case TimerOp::IsSet:
        runner.IsSet(m_input.Byte());
        break;
      case TimerOp::BadHandle: {
        const std::uint8_t which = m_input.Byte();
        runner.BadHandle(which, m_input.Byte());
        break;
      }
      case TimerOp::OverMaximum: {
        const std::uint8_t pick = m_input.Byte();
        const unsigned call = m_input.Byte();
        const std::uint64_t excess = m_input.U32();
        runner.OverMaximum(pick, call, excess, static_cast<UpdateIf>(m_input.Byte() % 4));
        break;
      }
      default:
        break;  // not a mutating operation: ignored here (callbacks and between dispatch steps)
    }
  }

  void TopLevelOperation() {
    const auto op = static_cast<TimerOp>(m_input.Byte() % fuzz::kTimerOpCount);
    switch (op) {
      case TimerOp::NextTimeout:
        m_runner.CheckNextTimeout();
        break;
      case TimerOp::AdvanceSmall:
        m_runner.Advance(m_input.Byte() % (3 * Traits::kGranularity + 1));
        break;
      case TimerOp::AdvanceToNextAndDispatch:
        m_runner.AdvanceToNextAndDispatch();
        break;
      case TimerOp::Dispatch:
        m_runner.Dispatch();
        break;
      case TimerOp::LongGap: {
        // A long gap without dispatch: up to several revolutions of a wheel, or days.
        const bool days = m_input.Byte() % 10 == 0;
        const std::uint64_t raw = m_input.U64();
        m_runner.Advance(days ? raw % (50ull * 24 * 3600 * 1000)
                              : raw % (3ull * Traits::kMaximumTimeout));
        break;
      }
      case TimerOp::CheckInvariants:
        m_runner.CheckInvariants();
        break;
      default:
        MutatingOperation(m_runner, op);
        break;
    }
  }

  const char* m_name;
  FuzzInput m_input;
  Runner m_runner;  // after m_input: it uses this chooser from construction on
};

template <class Traits>
void RunLane(const char* name, const std::uint8_t* data, std::size_t size) {
  try {
    Lane<Traits> lane(name, data, size);
    lane.Run();
  } catch (const DeliberateCallbackFailure&) {
    fuzz::Fail((std::string(name) + ": a callback's exception escaped a dispatch").c_str());
  } catch (const std::exception& error) {
    const std::string what = std::string(name) + ": unexpected exception: " + error.what();
    fuzz::Fail(what.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  RunLane<HeapTraits>("TimerQueue (heap)", data, size);
  RunLane<WheelTraits>("TimerWheel (15 ms)", data, size);
  RunLane<FineWheelTraits>("TimerWheel (1 ms)", data, size);
  return 0;
}
