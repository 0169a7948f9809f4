// The interface users of timers call: create, set, update, cancel and destroy timers.
#pragma once

#include "TimerQueue/ITimer.h"
#include "TimerQueue/TimerHandle.h"
#include "TimerQueue/TimerTypes.h"

namespace timerwheel {

// What a connection, a protocol or any other user of timers sees.
//
// Return values: SetTimer, UpdateTimer, CancelTimer and DestroyTimer all return "was the timer
// pending (set and not yet detached for dispatch) when the call was made?".
//
// Bad input changes nothing: a null, destroyed or stale handle throws InvalidTimerHandle (in every
// build); a timeout over GetMaximumTimeout() throws std::out_of_range and leaves the timer exactly
// as it was.
//
// Deadlines: a timer set at time t with timeout d never fires before t + d. The heap fires at
// t + d; the wheel at the first slot boundary at or after t + d (at most one granularity late).
// Timers due at the same instant (or in one wheel slot) fire in the order they were set.
//
// Dispatch: when a timer expires the queue copies its active data (ITimer and user data) into the
// dispatch batch and the timer becomes "not set" before any callback runs. Setting, updating,
// cancelling or destroying the timer after that (from its own callback or from another thread)
// touches only the next arming. In particular, CancelTimer on a timer whose expiry has already
// been detached returns false and does NOT stop that callback.
//
// Thread safety: implementations are not thread-safe by themselves; the drivers (threaded, Asio,
// IOCP) add the locking. See IManageTimerQueue for what runs under the lock.
class ITimerQueue {
 public:
  enum class SetIf { Always, NotSet };
  enum class UpdateIf { Always, NewTimeIsSooner, NewTimeIsLater, AlwaysNoTimeoutChange };

  // A new, unset timer. Never reads the clock; allocates only while the pool grows.
  virtual TimerHandle CreateTimer() = 0;

  // True while the timer is set and its expiry has not yet been detached for dispatch.
  virtual bool TimerIsSet(TimerHandle handle) const = 0;

  // Arms the timer to call timer.OnTimer(userData) `timeout` ms from now, replacing any pending
  // arming. With SetIf::NotSet, a pending timer is left completely unchanged (the call still
  // returns true). Returns whether the timer was pending.
  virtual bool SetTimer(TimerHandle handle, ITimer& timer, Milliseconds timeout, UserData userData,
                        SetIf setIf = SetIf::Always) = 0;

  // On an unset timer: sets it (any condition). On a pending timer:
  //  - Always: reschedules to now + timeout with the new timer and user data;
  //  - NewTimeIsSooner / NewTimeIsLater: the same, only if the new deadline is strictly
  //    sooner / later than the pending one; otherwise NOTHING changes (timer, user data and
  //    deadline are all kept);
  //  - AlwaysNoTimeoutChange: replaces timer and user data, keeps the deadline (and its place in
  //    the firing order); the timeout must still be valid.
  // *wasUpdated (if given) says whether anything changed. Returns whether the timer was pending.
  virtual bool UpdateTimer(TimerHandle handle, ITimer& timer, Milliseconds timeout,
                           UserData userData, UpdateIf updateIf = UpdateIf::Always,
                           bool* wasUpdated = nullptr) = 0;

  // Unschedules a pending timer (its callback will not run). Returns whether it was pending.
  virtual bool CancelTimer(TimerHandle handle) = 0;

  // Cancels the timer if pending, frees it and sets `handle` to null. If the timer's expiry is
  // being dispatched, the record is freed once dispatch ends; the handle is invalid at once.
  virtual bool DestroyTimer(TimerHandle& handle) = 0;

  // Fire-and-forget: an internal timer that frees itself after it fires, or when the queue is
  // destroyed first (then it never fires).
  virtual void SetOneShotTimer(ITimer& timer, Milliseconds timeout, UserData userData) = 0;

  // The largest timeout this queue accepts (at most kInfinite - 1); fixed when the queue is made.
  virtual Milliseconds GetMaximumTimeout() const = 0;

  virtual ~ITimerQueue() = default;
};

}  // namespace timerwheel
