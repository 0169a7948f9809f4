// The ITimerQueue half of every driver: each call takes the driver's lock and forwards to the
// underlying IManageTimerQueue; after anything that arms a timer the driver hears about it.
#pragma once

#include <mutex>

#include "TimerQueue/IManageTimerQueue.h"

namespace timerwheel::detail {

// Locking: every method holds `mutex` for its whole duration, including AfterArming; except
// GetMaximumTimeout, a constant of the queue read once at construction (a protocol that clamps
// every arming to it should not pay a lock for it).
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
  Milliseconds GetMaximumTimeout() const override { return m_maximumTimeout; }

 protected:
  using Lock = std::unique_lock<Mutex>;

  // Does not touch `mutex`: it may be a member of the derived class, not yet built. The queue
  // is not in use yet, so its maximum timeout is read without it.
  LockingTimerQueue(Mutex& mutex, IManageTimerQueue& queue)
      : m_mutex(mutex), m_queue(queue), m_maximumTimeout(queue.GetMaximumTimeout()) {}

  // Lock held: a timer was armed, so the next expiry may have come forward. Not called when the
  // call threw (nothing changed). Must not throw: the queue has changed by then, and a set that
  // threw would tell its caller (the transport's RetrySoon, for one) that nothing was armed
  // while the timer stays set. So a driver whose wake-up needs memory makes it beforehand, and
  // if a wake-up still cannot be had, it leaves the set in place and makes sure the timer is
  // woken for anyway (AsioTimerQueue: its wait's and post's blocks are reserved when it is made;
  // a wait that Asio cannot start is replaced by a posted wake-up that tries again).
  virtual void AfterArming() noexcept = 0;

  Mutex& m_mutex;
  IManageTimerQueue& m_queue;
  const Milliseconds m_maximumTimeout;
};

}  // namespace timerwheel::detail
