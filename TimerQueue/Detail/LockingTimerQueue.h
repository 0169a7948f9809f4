// The ITimerQueue half of every driver: each call takes the driver's lock and forwards to the
// underlying IManageTimerQueue; after anything that arms a timer the driver hears about it.
#pragma once

#include <mutex>

#include "TimerQueue/IManageTimerQueue.h"

namespace timerwheel::detail {

// Locking: every method holds `mutex` for its whole duration, including AfterArming.
template <class Mutex>
class LockingTimerQueue : public ITimerQueue {
 public:
  TimerHandle CreateTimer() override {
    Lock lock(m_mutex);
    return m_queue.CreateTimer();
  }
  bool TimerIsSet(TimerHandle handle) const override {
    Lock lock(m_mutex);
    return m_queue.TimerIsSet(handle);
  }
  bool SetTimer(TimerHandle handle, ITimer& timer, Milliseconds timeout, UserData userData,
                SetIf setIf = SetIf::Always) override {
    Lock lock(m_mutex);
    const bool wasPending = m_queue.SetTimer(handle, timer, timeout, userData, setIf);
    AfterArming();
    return wasPending;
  }
  bool UpdateTimer(TimerHandle handle, ITimer& timer, Milliseconds timeout, UserData userData,
                   UpdateIf updateIf = UpdateIf::Always, bool* wasUpdated = nullptr) override {
    Lock lock(m_mutex);
    const bool wasPending =
        m_queue.UpdateTimer(handle, timer, timeout, userData, updateIf, wasUpdated);
    AfterArming();
    return wasPending;
  }
  // Cancelling never brings the next expiry forward: no driver needs to hear about it.
  bool CancelTimer(TimerHandle handle) override {
    Lock lock(m_mutex);
    return m_queue.CancelTimer(handle);
  }
  bool DestroyTimer(TimerHandle& handle) override {
    Lock lock(m_mutex);
    return m_queue.DestroyTimer(handle);
  }
  void SetOneShotTimer(ITimer& timer, Milliseconds timeout, UserData userData) override {
    Lock lock(m_mutex);
    m_queue.SetOneShotTimer(timer, timeout, userData);
    AfterArming();
  }
  Milliseconds GetMaximumTimeout() const override {
    Lock lock(m_mutex);
    return m_queue.GetMaximumTimeout();
  }

 protected:
  using Lock = std::unique_lock<Mutex>;

  // Only stores the references: `mutex` may be a member of the derived class, not yet built.
  LockingTimerQueue(Mutex& mutex, IManageTimerQueue& queue) : m_mutex(mutex), m_queue(queue) {}

  // Lock held: a timer was armed, so the next expiry may have come forward. Not called when the
  // call threw (nothing changed).
  virtual void AfterArming() = 0;

  Mutex& m_mutex;
  IManageTimerQueue& m_queue;
};

}  // namespace timerwheel::detail
