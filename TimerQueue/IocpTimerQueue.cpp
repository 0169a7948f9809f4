#include "TimerQueue/IocpTimerQueue.h"

#include <stdexcept>
#include <system_error>

namespace timerwheel {

IocpTimerQueue::IocpTimerQueue(HANDLE completionPort, IManageTimerQueue& queue,
                               IocpTimerQueueOptions options)
    : DispatchThread(queue, options.monitor),
      m_port(completionPort),
      m_options(std::move(options)) {
  if (m_options.callbacksPerPacket == 0) {
    throw std::invalid_argument("IocpTimerQueue: callbacksPerPacket must be at least 1");
  }
  StartThread();
}

IocpTimerQueue::~IocpTimerQueue() {
  StopThread();
  Lock lock(m_mutex);
  m_wake.wait(lock, [this] { return !m_batchInFlight; });  // a worker consumes the packet
}

void IocpTimerQueue::Dispatch(Lock& lock) {
  if (!m_queue.BeginTimeoutHandling()) return;
  m_batchInFlight = true;
  lock.unlock();
  Post();
  lock.lock();
  // The workers run the batch; wait for the last of them to end it.
  m_wake.wait(lock, [this] { return !m_batchInFlight; });
}

bool IocpTimerQueue::HandleCompletion(ULONG_PTR completionKey, OVERLAPPED* overlapped) noexcept {
  if (completionKey != reinterpret_cast<ULONG_PTR>(this) || overlapped != &m_packet) return false;
  const std::size_t budget = m_options.callbacksPerPacket;
  std::size_t handled = 0;
  bool exhausted = false;
  CallbackScope scope(*this);  // WaitForShutdownToComplete or destruction from a callback
  while (!exhausted && handled < budget && !ShutdownRequested()) {
    try {
      const std::size_t ran = m_queue.HandleTimeout(budget - handled);
      handled += ran;
      exhausted = handled < budget;
    } catch (...) {
      ++handled;  // the callback that threw counts as dispatched
      ReportCallbackError(m_options.onCallbackError, std::current_exception());
    }
  }
  if (exhausted || ShutdownRequested()) {
    EndBatch();
  } else {
    Post();  // more may remain: let other completions have a turn first
  }
  return true;
}

void IocpTimerQueue::EndBatch() noexcept {
  // Notify with the lock held and touch nothing after it is released: the moment the destructor
  // (or WaitForShutdownToComplete) sees m_batchInFlight false, this object may be destroyed.
  Lock lock(m_mutex);
  m_queue.EndTimeoutHandling();  // undispatched expiries (after a shutdown) stay in the queue
  m_batchInFlight = false;
  m_wake.notify_all();
}

void IocpTimerQueue::Post() noexcept {
  if (!::PostQueuedCompletionStatus(m_port, 0, reinterpret_cast<ULONG_PTR>(this), &m_packet)) {
    // Nothing can run the callbacks now (the port is gone). Report why, stop dispatching (posting
    // again would fail the same way, in a loop) and end the dispatch: the expiries stay due.
    ReportCallbackError(
        m_options.onCallbackError,
        std::make_exception_ptr(std::system_error(
            static_cast<int>(::GetLastError()), std::system_category(),
            "IocpTimerQueue: PostQueuedCompletionStatus failed; dispatch stopped")));
    BeginShutdown();
    EndBatch();
  }
}

}  // namespace timerwheel
