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

  // The operations the driver can have outstanding at once, whose memory it makes up front: one
  // wait of the steady_timer and one posted dispatch. Only one wait: an aim while a wait is
  // outstanding moves the steady_timer's expiry (which cancels that wait) and leaves the next
  // wait to the cancelled one's completion, which runs after Asio has freed its block; so a
  // burst of sooner sets needs no block per set, however long the io_context takes to run the
  // completion. Only one post: a set that finds something due posts a dispatch unless one is
  // posted already, and a wait that cannot be started is replaced by a post only when none is.
  static constexpr std::size_t kOperations = 2;

  Dispatcher(boost::asio::io_context& ioContext, IManageTimerQueue& queue,
             AsioTimerQueueOptions options)
      : m_queue(queue), m_options(std::move(options)), m_ioContext(ioContext), m_timer(ioContext) {
    m_handlerMemory.Reserve(kOperations);  // std::bad_alloc: no driver
  }

  std::recursive_mutex& Mutex() { return m_mutex; }
  IManageTimerQueue& Queue() { return m_queue; }

  // Lock held. Re-aims the steady_timer if the queue's next expiry is now sooner than its aim.
  // Does not throw: the set that calls it has changed the queue already (AfterArming). Neither
  // a re-aim nor a post needs memory beyond the driver's reserved blocks; if Asio cannot start
  // a wait (its own heap of waiting timers, at a new high-water mark of the io_context's), a
  // posted wake-up stands in for it and tries again (Aim).
  void AimIfSooner() noexcept {
    if (m_dispatching || m_shutdown) return;  // the dispatcher aims it when it ends
    const Ticks next = m_queue.GetNextExpiry();
    if (next >= m_aimedAt) return;
    if (next == 0) {
      PostWakeUp();
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
  // Lock held, not dispatching. Aims at `next` (kNoExpiry: nothing set). What it commits
  // (m_aimedAt, m_waiting) it commits only once the operation that will wake for it is
  // started, and if none can be, a posted wake-up takes its place: a failure never leaves a
  // set timer with nothing to wake for it.
  void Aim(Ticks next) noexcept {
    if (next == IManageTimerQueue::kNoExpiry) {
      // An outstanding wait completes (operation_aborted) and, finding nothing aimed, ends.
      boost::system::error_code ignored;
      if (m_waiting) m_timer.cancel(ignored);
      m_aimedAt = next;
      return;
    }
    // At most kMaximumSleep: a completion that finds nothing due simply aims again.
    const auto timeout =
        std::chrono::milliseconds(std::min(m_queue.GetNextTimeout(), detail::kMaximumSleep));
    try {
      // Cancels the outstanding wait, if any: its completion starts the next wait at the new
      // expiry (OnWaitCompleted), from the block it frees.
      m_timer.expires_after(timeout);
      if (!m_waiting) StartWait();
    } catch (...) {  // std::bad_alloc from Asio's timer heap (or a system_error): no wait
      return PostWakeUp();
    }
    m_aimedAt = next;
  }

  // Lock held. Starts the wait for the steady_timer's expiry; throws (std::bad_alloc) having
  // started nothing. Its operation takes the driver's reserved block for a wait: no other wait
  // is outstanding.
  void StartWait() {
    m_timer.async_wait(detail::WithMemory(
        m_handlerMemory, [self = shared_from_this()](const boost::system::error_code& error) {
          self->OnWaitCompleted(error);
        }));
    m_waiting = true;
  }

  // Lock held. A dispatch is due (a set found the clock past the next expiry before the
  // steady_timer's wait completed: on a busy queue, a datagram that arrives in the first
  // moments of each tick), or a wait could not be started: a posted handler wakes the
  // dispatcher. Re-aiming the steady_timer at 0 instead would reprogram the system timer twice
  // (Linux: timerfd_settime when aimed, again when the reactor takes the expiry), about 7 us
  // each in a VM, on every tick. An outstanding wait is left alone: its completion finds the
  // post and ends, or finds the aim the post's wake-up made. Until that wake-up, m_aimedAt is
  // 0, so however many sets find something due, one is posted.
  // Cannot fail: its operation takes the driver's reserved block for a post (none other is
  // outstanding), and a post allocates nothing else.
  void PostWakeUp() noexcept {
    if (!m_posted) {
      detail::DeferOrPost(m_ioContext,
                          detail::WithMemory(m_handlerMemory, [self = shared_from_this()] {
                            self->OnPostCompleted();
                          }));
      m_posted = true;
    }
    m_aimedAt = 0;
  }

  void OnWaitCompleted(const boost::system::error_code& error) {
    Lock lock(m_mutex);
    m_waiting = false;
    // Shut down; or a dispatch is running or posted (either aims when it ends); or cancelled
    // with nothing set.
    if (m_shutdown || m_dispatching || m_posted) return;
    if (m_aimedAt == IManageTimerQueue::kNoExpiry) return;
    if (error == boost::asio::error::operation_aborted) {
      // Re-aimed (Aim moved the expiry): the wait goes on, to the new expiry.
      try {
        StartWait();
      } catch (...) {
        PostWakeUp();
      }
      return;
    }
    WakeUp(lock);
  }

  void OnPostCompleted() {
    Lock lock(m_mutex);
    m_posted = false;
    if (m_shutdown || m_dispatching) return;
    WakeUp(lock);
  }

  // Lock held: the steady_timer's expiry, or a posted wake-up. Dispatches what is due and aims
  // at what is next.
  void WakeUp(Lock& lock) {
    m_aimedAt = IManageTimerQueue::kNoExpiry;
    if (m_options.monitor) m_options.monitor->OnDispatchWakeUp();
    if (m_queue.GetNextTimeout() == 0) Dispatch(lock);
    // Left-overs (after a throw under WithLockHeld, or a shutdown) make this 0: aimed at once.
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

  // First, so last to go: every operation's memory lives here (its handler keeps this alive).
  detail::HandlerMemory m_handlerMemory;
  std::recursive_mutex m_mutex;
  std::condition_variable_any m_idle;  // signalled when a dispatch ends
  IManageTimerQueue& m_queue;
  const AsioTimerQueueOptions m_options;
  boost::asio::io_context& m_ioContext;
  boost::asio::steady_timer m_timer;
  // The soonest expiry that an outstanding operation will wake the dispatcher for: the
  // steady_timer's aim while a wait is outstanding (or is to be restarted by a cancelled one's
  // completion), 0 while a wake-up is posted, kNoExpiry if nothing will.
  Ticks m_aimedAt = IManageTimerQueue::kNoExpiry;
  bool m_waiting = false;  // a wait is outstanding: started, its completion not yet run
  bool m_posted = false;   // a wake-up is posted and has not run
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

void AsioTimerQueue::AfterArming() noexcept { m_dispatcher->AimIfSooner(); }

void AsioTimerQueue::BeginShutdown() noexcept { m_dispatcher->BeginShutdown(); }

bool AsioTimerQueue::WaitForShutdownToComplete(std::chrono::milliseconds timeout) {
  return m_dispatcher->WaitForShutdownToComplete(timeout);
}

}  // namespace timerwheel
