// The interface a driver uses to run a timer queue: when to wake, and how to dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "TimerQueue/ITimerQueue.h"

namespace timerwheel {

// Locking contract (the "dual data" scheme). A driver that lets several threads use the queue
// protects it with one lock and runs each dispatch as:
//
//   lock   { if (!BeginTimeoutHandling()) return; }   // detach every due timer into a batch
//   unlock { HandleTimeout(); }                       // run callbacks from the batch's copies
//   lock   { EndTimeoutHandling(); }                  // free what was destroyed meanwhile
//
// Everything except HandleTimeout must be called with the lock held. HandleTimeout touches only
// the batch, which only Begin/End change, so while it runs other threads may (under the lock)
// call any ITimerQueue method, on any timer, including the ones in the batch; and callbacks may do
// the same. Only one thread may be dispatching (between Begin and End) at a time.
//
// A single-threaded user calls HandleTimeouts(), or may hold its lock across all three steps.
class IManageTimerQueue : public ITimerQueue {
 public:
  // Milliseconds until the next timer is due: 0 if something is due now (including expiries
  // left undispatched by an earlier EndTimeoutHandling), kInfinite if nothing is set. Never
  // throws; reads the clock only when something is set.
  virtual Milliseconds GetNextTimeout() = 0;

  // The same information as an absolute instant, for drivers deciding whether a set brought the
  // next expiry forward: when the first timer fires (0 if something is due already, including
  // left-over expiries; kNoExpiry if nothing is set). Exact, never reads the clock, never throws.
  static constexpr Ticks kNoExpiry = ~Ticks{0};
  virtual Ticks GetNextExpiry() noexcept = 0;

  // Lock held. Detaches every due timer, in firing order, into the dispatch batch: each one's
  // active data moves to the batch's timed-out copy and the timer becomes "not set". Returns true
  // if there is anything to dispatch; then the caller must call HandleTimeout (any number of
  // times) and EndTimeoutHandling. Returns false otherwise, and then no End is needed.
  // Throws std::logic_error if a dispatch is already in progress.
  virtual bool BeginTimeoutHandling() = 0;

  // Lock NOT held. Runs up to `budget` callbacks from the batch and returns how many ran; call it
  // again to continue. If a callback throws, the exception propagates and that expiry counts as
  // dispatched; the next call continues with the one after it. Throws std::logic_error outside
  // Begin/End.
  virtual std::size_t HandleTimeout(std::size_t budget = SIZE_MAX) = 0;

  // Lock held. Ends the dispatch: frees timers destroyed during it and one-shot timers that
  // fired. Expiries not yet dispatched stay due (first in line at the next Begin); nothing is
  // dropped. Throws std::logic_error, changing nothing, without a matching Begin or from a
  // timer callback (while HandleTimeout runs; Begin from one throws too: a dispatch is in
  // progress).
  virtual void EndTimeoutHandling() = 0;

  // One complete dispatch for single-threaded use: Begin, Handle everything, End. If a callback
  // throws, the dispatch is ended (the rest stay due) and the exception propagates. Returns the
  // number of callbacks run.
  std::size_t HandleTimeouts() {
    if (!BeginTimeoutHandling()) return 0;
    std::size_t handled = 0;
    try {
      handled = HandleTimeout();
    } catch (...) {
      EndTimeoutHandling();
      throw;
    }
    EndTimeoutHandling();
    return handled;
  }
};

}  // namespace timerwheel
