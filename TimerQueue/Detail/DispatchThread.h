// The thread that ThreadedTimerQueue and IocpTimerQueue share: it sleeps until the queue's next
// expiry and then calls the driver's Dispatch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "TimerQueue/Detail/LockingTimerQueue.h"
#include "TimerQueue/ITimerQueueMonitor.h"

namespace timerwheel::detail {

// Ground rules (locking):
//  - m_mutex (recursive, so that callbacks run under it may call back in) guards the underlying
//    queue and every member here except m_shutdown, which is atomic so that dispatch loops can
//    poll it between callbacks without the lock.
//  - The thread holds m_mutex except while it sleeps on m_wake and while the derived Dispatch
//    releases it.
//  - A set wakes the thread only if it brings the queue's next expiry forward; expiries are
//    compared as absolute ticks, so a later timer can never look sooner through rounding.
//
// Derived classes call StartThread() at the end of their constructor and StopThread() at the
// start of their destructor (the thread calls the virtual Dispatch, so it must not outlive them).
class DispatchThread : public LockingTimerQueue<std::recursive_mutex> {
 public:
  // Stops dispatching: prompt, from any thread, callbacks included.
  void BeginShutdown() noexcept;
  // True once the thread has stopped and the derived class has nothing in flight (Quiesce).
  // Throws std::logic_error on the dispatch thread itself.
  bool WaitForShutdownToComplete(std::chrono::milliseconds timeout);

 protected:
  DispatchThread(IManageTimerQueue& queue, ITimerQueueMonitor* monitor);
  ~DispatchThread() override;

  void StartThread();
  void StopThread() noexcept;

  // Lock held on entry and on return; called when something is due. May release the lock.
  virtual void Dispatch(Lock& lock) = 0;
  // Lock held, thread stopped: true if nothing of this driver is still running; the driver may
  // first take back what it had handed out (IocpTimerQueue: a packet no worker has dequeued).
  virtual bool Quiesce() { return true; }

  bool ShutdownRequested() const noexcept { return m_shutdown.load(std::memory_order_acquire); }
  // True on the dispatch thread, and on any thread inside a CallbackScope of this driver.
  bool OnDispatchThread() const noexcept {
    return m_thread.get_id() == std::this_thread::get_id() || t_runningCallbacksOf == this;
  }

  // A driver whose callbacks run on other threads (IocpTimerQueue: the port's workers) marks
  // them, so that a callback that waits for or destroys its own driver is recognised there too.
  class CallbackScope {
   public:
    explicit CallbackScope(const DispatchThread& driver) noexcept
        : m_previous(t_runningCallbacksOf) {
      t_runningCallbacksOf = &driver;
    }
    ~CallbackScope() { t_runningCallbacksOf = m_previous; }
    CallbackScope(const CallbackScope&) = delete;
    CallbackScope& operator=(const CallbackScope&) = delete;

   private:
    const DispatchThread* m_previous;
  };

  std::recursive_mutex m_mutexStorage;
  std::condition_variable_any m_wake;  // wakes the thread; also signalled when a dispatch ends

 private:
  void AfterArming() noexcept final;
  void Run() noexcept;
  void WakeThread() noexcept;
  // Lock held: sleeps until woken(), or for at most `timeout`, or (timeout == kInfinite) for ever.
  template <class Predicate>
  void Sleep(Lock& lock, Milliseconds timeout, Predicate woken);

  static thread_local const DispatchThread* t_runningCallbacksOf;

  ITimerQueueMonitor* const m_monitor;
  bool m_sleeping = false;
  bool m_wakeRequested = false;
  Ticks m_sleepUntil = 0;  // while sleeping: the next expiry when it fell asleep
  std::atomic<bool> m_shutdown{false};
  std::promise<void> m_stopped;
  std::shared_future<void> m_stoppedFuture;
#ifdef _WIN32
  // The thread's timed sleep is a Win32 relative wait on this auto-reset event: MSVC STL builds
  // before VS 2022 17.10 turned condition_variable_any::wait_for into a system-clock deadline
  // (microsoft/STL#4457), so setting the clock back stalled dispatch for as long.
  void* m_wakeEvent;
#endif
  std::thread m_thread;
};

}  // namespace timerwheel::detail
