#include "TimerQueue/AsioTimerQueue.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "TimerQueue/Detail/DeferOrPost.h"
#include "TimerQueue/Detail/DestroyedFromOwnCallback.h"
#include "TimerQueue/Detail/HandlerMemory.h"
#include "TimerQueue/Detail/MaximumSleep.h"
#include "TimerQueue/Detail/RunDispatch.h"
#include "TimerQueue/Detail/WaitDeadline.h"

namespace timerwheel {

class AsioTimerQueue::Dispatcher : public std::enable_shared_from_this<Dispatcher> {
 public:
  using Lock = std::unique_lock<std::recursive_mutex>;

  Dispatcher(boost::asio::io_context& ioContext, IManageTimerQueue& queue,
             AsioTimerQueueOptions options)
      : m_queue(queue), m_options(std::move(options)), m_ioContext(ioContext), m_timer(ioContext) {}

  std::recursive_mutex& Mutex() { return m_mutex; }
  IManageTimerQueue& Queue() { return m_queue; }

  // Lock held. Re-aims the steady_timer if the queue's next expiry is now sooner than its aim.
  void AimIfSooner() {
    if (m_dispatching || m_shutdown) return;  // the dispatcher aims it when it ends
    const Ticks next = m_queue.GetNextExpiry();
    if (next >= m_aimedAt) return;
    if (next == 0) {
      PostDispatch();
    } else {
      Aim(next);
    }
  }

  void BeginShutdown() noexcept {
    // The flag before the lock: a dispatch under WithLockHeld holds it and polls the flag between
    // callbacks, so this waits for the callback in hand, not the whole batch.
    m_shutdown.store(true, std::memory_order_release);
    Lock lock(m_mutex);
    boost::system::error_code ignored;
    m_timer.cancel(ignored);
  }

  bool WaitForShutdownToComplete(std::chrono::milliseconds timeout) {
    Lock lock(m_mutex);
    if (m_dispatching && m_dispatchThread == std::this_thread::get_id()) {
      throw std::logic_error(
          "AsioTimerQueue: WaitForShutdownToComplete called from a timer callback");
    }
    // Without a shutdown, callbacks will run: "no callback will run" is not true (and a wait
    // for it would end only by its timeout, as DispatchThread's does).
    if (!m_shutdown.load(std::memory_order_acquire)) return false;
    const auto deadline = detail::WaitDeadline(timeout);
    if (!deadline) {
      m_idle.wait(lock, [this] { return !m_dispatching; });
      return true;
    }
    return m_idle.wait_until(lock, *deadline, [this] { return !m_dispatching; });
  }

  void WaitUntilIdle() {
    Lock lock(m_mutex);
    m_idle.wait(lock, [this] { return !m_dispatching; });
  }

  bool IsDispatchingOnThisThread() {
    Lock lock(m_mutex);
    return m_dispatching && m_dispatchThread == std::this_thread::get_id();
  }

 private:
  void Aim(Ticks next) {
    ++m_aim;  // completions of earlier aims are now stale
    m_aimedAt = next;
    if (next == IManageTimerQueue::kNoExpiry) {
      boost::system::error_code ignored;
      m_timer.cancel(ignored);
      return;
    }
    // At most kMaximumSleep: a completion that finds nothing due simply aims again.
    m_timer.expires_after(
        std::chrono::milliseconds(std::min(m_queue.GetNextTimeout(), detail::kMaximumSleep)));
    // Every aim starts a wait: its operation comes from m_handlerMemory, so that a warm driver
    // allocates nothing (an aim that supersedes another needs a second block until the
    // cancelled wait's completion has run).
    m_timer.async_wait(detail::WithMemory(
        m_handlerMemory, [self = shared_from_this(), aim = m_aim](
                             const boost::system::error_code&) { self->OnTimerCompleted(aim); }));
  }

  // Something is due already: a set found the clock past the next expiry before the steady_timer's
  // wait completed (on a busy queue, a datagram that arrives in the first moments of each tick).
  // A posted handler dispatches it; re-aiming the steady_timer at 0 instead would reprogram the
  // system timer twice (Linux: timerfd_settime when aimed, again when the reactor takes the
  // expiry), about 7 us each in a VM, on every tick. The pending wait is left alone: it is stale
  // now, and the dispatch's own aim replaces it. Until that aim, m_aimedAt is 0, so however many
  // sets find something due, one dispatch is posted.
  void PostDispatch() {
    ++m_aim;
    m_aimedAt = 0;
    detail::DeferOrPost(
        m_ioContext, detail::WithMemory(m_handlerMemory, [self = shared_from_this(), aim = m_aim] {
          self->OnTimerCompleted(aim);
        }));
  }

  void OnTimerCompleted(std::uint64_t aim) {
    Lock lock(m_mutex);
    if (m_shutdown || aim != m_aim) return;  // cancelled, or superseded by a sooner aim
    m_aimedAt = IManageTimerQueue::kNoExpiry;
    if (m_options.monitor) m_options.monitor->OnDispatchWakeUp();
    if (m_queue.GetNextTimeout() == 0) Dispatch(lock);
    // Left-overs (after a throw under WithLockHeld, or a shutdown) make this 0: a new handler.
    if (!m_shutdown) Aim(m_queue.GetNextExpiry());
  }

  void Dispatch(Lock& lock) {
    m_dispatching = true;
    m_dispatchThread = std::this_thread::get_id();
    detail::RunDispatch(m_queue, lock, m_options.dispatchPolicy, m_options.onCallbackError,
                        [this] { return m_shutdown.load(std::memory_order_acquire); });
    m_dispatching = false;
    m_idle.notify_all();
  }

  // First, so last to go: every wait's operation lives here (its handler keeps this alive).
  detail::HandlerMemory m_handlerMemory;
  std::recursive_mutex m_mutex;
  std::condition_variable_any m_idle;  // signalled when a dispatch ends
  IManageTimerQueue& m_queue;
  const AsioTimerQueueOptions m_options;
  boost::asio::io_context& m_ioContext;
  boost::asio::steady_timer m_timer;
  Ticks m_aimedAt = IManageTimerQueue::kNoExpiry;  // the expiry the steady_timer is aimed at
  std::uint64_t m_aim = 0;                         // which aim a completion belongs to
  bool m_dispatching = false;
  std::thread::id m_dispatchThread;
  std::atomic<bool> m_shutdown{false};  // read without the mutex between callbacks
};

AsioTimerQueue::AsioTimerQueue(boost::asio::io_context& ioContext, IManageTimerQueue& queue,
                               AsioTimerQueueOptions options)
    : AsioTimerQueue(std::make_shared<Dispatcher>(ioContext, queue, std::move(options))) {}

// The dispatcher is made first (above) so that the lock-and-forward layer can take its mutex.
AsioTimerQueue::AsioTimerQueue(std::shared_ptr<Dispatcher> dispatcher)
    : LockingTimerQueue(dispatcher->Mutex(), dispatcher->Queue()),
      m_dispatcher(std::move(dispatcher)) {
  Lock lock(m_mutex);
  m_dispatcher->AimIfSooner();  // the queue may already hold timers
}

AsioTimerQueue::~AsioTimerQueue() {
  m_dispatcher->BeginShutdown();
  if (m_dispatcher->IsDispatchingOnThisThread()) detail::TerminateDestroyedFromOwnCallback();
  m_dispatcher->WaitUntilIdle();
}

void AsioTimerQueue::AfterArming() { m_dispatcher->AimIfSooner(); }

void AsioTimerQueue::BeginShutdown() noexcept { m_dispatcher->BeginShutdown(); }

bool AsioTimerQueue::WaitForShutdownToComplete(std::chrono::milliseconds timeout) {
  return m_dispatcher->WaitForShutdownToComplete(timeout);
}

}  // namespace timerwheel
