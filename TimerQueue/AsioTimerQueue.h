// AsioTimerQueue: runs any IManageTimerQueue on a boost::asio::io_context, so timer callbacks run
// as io_context handlers (IOCP threads on Windows, epoll on Linux).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <mutex>

#include "TimerQueue/Detail/LockingTimerQueue.h"
#include "TimerQueue/DriverOptions.h"
#include "TimerQueue/IManageTimerQueue.h"

namespace timerwheel {

using AsioTimerQueueOptions = LockingDriverOptions;

// One boost::asio::steady_timer is kept aimed at the queue's next expiry; when it completes, its
// handler dispatches everything due (on whichever thread runs the io_context) and re-aims it.
//
// Ground rules (locking):
//  - One recursive mutex guards the underlying queue and the steady_timer; every ITimerQueue
//    call takes it, from any thread (detail::LockingTimerQueue, as for the other drivers).
//    Callbacks under DispatchPolicy::WithLockHeld may call back in.
//  - At most one dispatch runs at a time, even with many io_context threads: the steady_timer is
//    not re-aimed while a dispatch is in progress; the dispatcher re-aims it when it ends.
//  - Under WithoutLock, callbacks run without the mutex (Begin and End hold it).
//  - Handlers keep the driver's internal state alive, so a completion that arrives after the
//    driver was destroyed finds it shut down and touches nothing else.
//  - Allocation: the driver's operations (the steady_timer's wait, a posted wake-up; at most one
//    of each is outstanding) come from blocks of its own, made when it is (detail::HandlerMemory,
//    its own small mutex), so no aim allocates. Only Asio's own heap of the io_context's
//    waiting timers can still grow when a wait starts (at a new high-water mark of timers
//    waiting at once): if it cannot, a posted wake-up stands in for the wait and tries again,
//    on every run of it (so, busily) until it can. No set ever fails or goes unaimed for it.
//
// Wake-ups: a set re-aims the steady_timer only if it brings the next expiry forward, and posts a
// dispatch instead if that expiry is due already (the clock passed it before the wait completed);
// each completion or posted dispatch, whether it finds work to do or not, is reported to the
// monitor's OnDispatchWakeUp (not a completion that only restarts a wait a re-aim cancelled).
// Errors: a callback that throws is reported to onCallbackError and dispatch carries on.
// Shutdown: BeginShutdown cancels the steady_timer; timers still pending never fire (they stay in
// the underlying queue). After WaitForShutdownToComplete returns true no callback is running or
// will run; before BeginShutdown it returns false at once. The destructor does both; destroy the
// driver before the io_context and the queue.
class AsioTimerQueue final : public detail::LockingTimerQueue<std::recursive_mutex> {
 public:
  AsioTimerQueue(boost::asio::io_context& ioContext, IManageTimerQueue& queue,
                 AsioTimerQueueOptions options = {});
  ~AsioTimerQueue() override;

  AsioTimerQueue(const AsioTimerQueue&) = delete;
  AsioTimerQueue& operator=(const AsioTimerQueue&) = delete;

  void BeginShutdown() noexcept;
  // True once no callback is running; throws std::logic_error from a callback.
  bool WaitForShutdownToComplete(std::chrono::milliseconds timeout);

 private:
  // The steady_timer, the mutex and the dispatch: shared with the io_context's handlers, which
  // keep it alive after the driver is gone.
  class Dispatcher;

  explicit AsioTimerQueue(std::shared_ptr<Dispatcher> dispatcher);
  void AfterArming() noexcept override;

  std::shared_ptr<Dispatcher> m_dispatcher;
};

}  // namespace timerwheel
