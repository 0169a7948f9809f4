// Benchmark adapters for this library's queues: direct calls on the concrete type, or through
// ITimerQueue& to show what the virtual interface costs.
#pragma once

#include <memory>
#include <vector>

#include "BenchmarkClock.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"

namespace timerwheel::perf {

// Every adapter offers: Create() -> index; Arm(index, timeout) (set or re-arm); Cancel(index);
// RunDue() (fire what is due at BenchmarkClock::Now()); NextTimeout(); log. Arm and Cancel are
// inlined into the workloads' loops, as the floor's are (FloorWheelAdapter.h): the loops measure
// the queue's operations, not a call into the adapter.
template <class Queue, bool kThroughInterface>
class TimerWheelLibraryAdapter final : public ITimer {
 public:
  static constexpr bool kVirtualTime = true;

  explicit TimerWheelLibraryAdapter(std::size_t capacity, FiringLog& log)
      : m_queue(MakeQueue(capacity)), m_log(log) {
    m_handles.reserve(capacity);
  }

  std::size_t Create() {
    m_handles.push_back(Api().CreateTimer());
    return m_handles.size() - 1;
  }
  TIMERWHEEL_ALWAYS_INLINE void Arm(std::size_t timer, Milliseconds timeout) {
    Api().SetTimer(m_handles[timer], *this, timeout, timer);
  }
  TIMERWHEEL_ALWAYS_INLINE void Cancel(std::size_t timer) { Api().CancelTimer(m_handles[timer]); }
  std::size_t RunDue() { return m_queue->HandleTimeouts(); }
  Milliseconds NextTimeout() { return m_queue->GetNextTimeout(); }

  void OnTimer(UserData timer) override { m_log.Record(timer); }

 private:
  static std::unique_ptr<Queue> MakeQueue(std::size_t capacity) {
    static const BenchmarkTickProvider ticks;
    if constexpr (std::is_same_v<Queue, TimerWheel>) {
      TimerWheelOptions options;  // 15 ms granularity, as a server on Windows ticks
      options.maximumTimeout = 60'000;
      options.initialCapacity = capacity;
      return std::make_unique<Queue>(options, ticks);
    } else {
      TimerQueueOptions options;
      options.initialCapacity = capacity;
      return std::make_unique<Queue>(options, ticks);
    }
  }
  auto& Api() {
    if constexpr (kThroughInterface) {
      return static_cast<ITimerQueue&>(*m_queue);
    } else {
      return *m_queue;
    }
  }

  std::unique_ptr<Queue> m_queue;
  FiringLog& m_log;
  std::vector<TimerHandle> m_handles;
};

using HeapAdapter = TimerWheelLibraryAdapter<TimerQueue, false>;
using WheelAdapter = TimerWheelLibraryAdapter<TimerWheel, false>;
using WheelInterfaceAdapter = TimerWheelLibraryAdapter<TimerWheel, true>;

}  // namespace timerwheel::perf
