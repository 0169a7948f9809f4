// An ITimerQueueMonitor that counts every event with relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>

#include "TimerQueue/ITimerQueueMonitor.h"

namespace timerwheel {

// Thread-safe. Counters are independent relaxed atomics: a snapshot taken while other threads are
// using the queue is not a consistent cut, so check invariants such as LiveTimers() == 0 once the
// queue is quiescent.
class CountingTimerQueueMonitor final : public ITimerQueueMonitor {
 public:
  using Count = std::uint64_t;

  void OnTimerCreated() override { Add(m_created); }
  void OnOneShotTimerCreated() override { Add(m_oneShotCreated); }
  void OnTimerSet(bool wasPending) override {
    Add(m_set);
    if (wasPending) Add(m_setWhilePending);
  }
  void OnTimerUpdated(bool wasPending, bool wasUpdated) override {
    Add(m_updateCalls);
    if (wasUpdated) Add(m_updated);
    if (wasUpdated && wasPending) Add(m_updatedWhilePending);
  }
  void OnTimerCancelled(bool wasPending) override {
    Add(m_cancelCalls);
    if (wasPending) Add(m_cancelled);
  }
  void OnTimerFired() override { Add(m_fired); }
  void OnTimerDestroyed(bool wasPending) override {
    Add(m_destroyed);
    if (wasPending) Add(m_destroyedWhilePending);
  }
  void OnTimerDeleted() override { Add(m_deleted); }
  void OnDispatchWakeUp() override { Add(m_wakeUps); }

  Count Created() const noexcept { return Get(m_created); }
  Count OneShotCreated() const noexcept { return Get(m_oneShotCreated); }
  Count Set() const noexcept { return Get(m_set); }
  Count SetWhilePending() const noexcept { return Get(m_setWhilePending); }
  Count UpdateCalls() const noexcept { return Get(m_updateCalls); }
  Count Updated() const noexcept { return Get(m_updated); }
  Count UpdatedWhilePending() const noexcept { return Get(m_updatedWhilePending); }
  Count CancelCalls() const noexcept { return Get(m_cancelCalls); }
  Count Cancelled() const noexcept { return Get(m_cancelled); }
  Count Fired() const noexcept { return Get(m_fired); }
  Count Destroyed() const noexcept { return Get(m_destroyed); }
  Count DestroyedWhilePending() const noexcept { return Get(m_destroyedWhilePending); }
  Count Deleted() const noexcept { return Get(m_deleted); }
  Count WakeUps() const noexcept { return Get(m_wakeUps); }

  // Records not yet freed: timers created and not destroyed, plus one-shots not yet fired.
  Count LiveTimers() const noexcept { return Created() + OneShotCreated() - Deleted(); }

 private:
  using Counter = std::atomic<Count>;
  static void Add(Counter& counter) noexcept { counter.fetch_add(1, std::memory_order_relaxed); }
  static Count Get(const Counter& counter) noexcept {
    return counter.load(std::memory_order_relaxed);
  }

  Counter m_created{0}, m_oneShotCreated{0}, m_set{0}, m_setWhilePending{0}, m_updateCalls{0},
      m_updated{0}, m_updatedWhilePending{0}, m_cancelCalls{0}, m_cancelled{0}, m_fired{0},
      m_destroyed{0}, m_destroyedWhilePending{0}, m_deleted{0}, m_wakeUps{0};
};

}  // namespace timerwheel
