#include "TimerQueue/Detail/DispatchThread.h"

#include <algorithm>
#include <stdexcept>
#include <system_error>

#ifdef _WIN32
#include <windows.h>  // WIN32_LEAN_AND_MEAN and NOMINMAX come from the build
#endif

#include "TimerQueue/Detail/DestroyedFromOwnCallback.h"
#include "TimerQueue/Detail/MaximumSleep.h"
#include "TimerQueue/Detail/WaitDeadline.h"

namespace timerwheel::detail {

thread_local const DispatchThread* DispatchThread::t_runningCallbacksOf = nullptr;

DispatchThread::DispatchThread(IManageTimerQueue& queue, ITimerQueueMonitor* monitor)
    : LockingTimerQueue(m_mutexStorage, queue),
      m_monitor(monitor),
      m_stoppedFuture(m_stopped.get_future().share()) {
#ifdef _WIN32
  m_wakeEvent = ::CreateEventW(nullptr, FALSE, FALSE, nullptr);  // auto-reset, not signalled
  if (m_wakeEvent == nullptr) {
    throw std::system_error(static_cast<int>(::GetLastError()), std::system_category(),
                            "DispatchThread: CreateEvent failed");
  }
#endif
}

DispatchThread::~DispatchThread() {
  StopThread();
#ifdef _WIN32
  ::CloseHandle(m_wakeEvent);
#endif
}

void DispatchThread::StartThread() {
  // Assigned under the lock that Run takes first, so that a callback's OnDispatchThread() (which
  // reads m_thread) can only run after the assignment.
  Lock lock(m_mutex);
  m_thread = std::thread([this] { Run(); });
}

void DispatchThread::StopThread() noexcept {
  BeginShutdown();
  if (!m_thread.joinable()) return;
  // Destroyed from one of its own callbacks: the thread would go on using freed members.
  if (OnDispatchThread()) TerminateDestroyedFromOwnCallback();
  m_thread.join();
}

void DispatchThread::BeginShutdown() noexcept {
  // The flag first, without the lock: a dispatch that holds it (WithLockHeld) polls the flag
  // between callbacks, so it stops after the one in hand and this call does not wait for the
  // whole batch. Then the lock, empty: a thread about to sleep has either seen the flag or is
  // waiting, and is woken, when it is released.
  m_shutdown.store(true, std::memory_order_release);
  { Lock lock(m_mutex); }
  WakeThread();
}

void DispatchThread::WakeThread() noexcept {
  m_wake.notify_all();  // also wakes waits for a dispatch to end
#ifdef _WIN32
  ::SetEvent(m_wakeEvent);
#endif
}

bool DispatchThread::WaitForShutdownToComplete(std::chrono::milliseconds timeout) {
  if (OnDispatchThread()) {
    throw std::logic_error("WaitForShutdownToComplete called from a timer callback");
  }
  const auto deadline = WaitDeadline(timeout);
  if (!deadline) {
    m_stoppedFuture.wait();
    Lock lock(m_mutex);
    m_wake.wait(lock, [this] { return Quiesce(); });
    return true;
  }
  if (m_stoppedFuture.wait_until(*deadline) != std::future_status::ready) return false;
  Lock lock(m_mutex);
  return m_wake.wait_until(lock, *deadline, [this] { return Quiesce(); });
}

void DispatchThread::AfterArming() noexcept {
  if (!m_sleeping) return;  // awake: it looks at the queue again before it next sleeps
  const Ticks next = m_queue.GetNextExpiry();
  if (next < m_sleepUntil) {
    m_sleepUntil = next;  // later sets compare against this, so they do not wake it again
    m_wakeRequested = true;
    WakeThread();
  }
}

template <class Predicate>
void DispatchThread::Sleep(Lock& lock, Milliseconds timeout, Predicate woken) {
#ifdef _WIN32
  // The event may also carry a stale signal (set after the last wait ended): the predicate
  // decides, and the remaining time is measured on the monotonic clock.
  const auto start = std::chrono::steady_clock::now();
  while (!woken()) {
    DWORD wait = INFINITE;
    if (timeout != kInfinite) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      if (elapsed.count() >= timeout) return;
      wait = static_cast<DWORD>(timeout - elapsed.count());
    }
    lock.unlock();
    ::WaitForSingleObject(m_wakeEvent, wait);
    lock.lock();
  }
#else
  if (timeout == kInfinite) {
    m_wake.wait(lock, woken);
  } else {
    m_wake.wait_for(lock, std::chrono::milliseconds(timeout), woken);
  }
#endif
}

void DispatchThread::Run() noexcept {
  Lock lock(m_mutex);
  while (!ShutdownRequested()) {
    const Milliseconds next = m_queue.GetNextTimeout();
    if (next == 0) {
      Dispatch(lock);
      continue;
    }
    m_sleeping = true;
    m_wakeRequested = false;
    m_sleepUntil = m_queue.GetNextExpiry();
    auto woken = [this] { return m_wakeRequested || ShutdownRequested(); };
    Sleep(lock, next == kInfinite ? kInfinite : std::min(next, kMaximumSleep), woken);
    m_sleeping = false;
    if (m_monitor) m_monitor->OnDispatchWakeUp();
  }
  lock.unlock();
  m_stopped.set_value();
}

}  // namespace timerwheel::detail
