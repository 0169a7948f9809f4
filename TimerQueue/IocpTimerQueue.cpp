#include "TimerQueue/IocpTimerQueue.h"

#include <windows.h>  // WIN32_LEAN_AND_MEAN and NOMINMAX come from the build

#include <stdexcept>
#include <system_error>
#include <type_traits>

namespace timerwheel {

// The packet posted to the port. It is a block of its own so that it can outlive its queue: a
// shutdown that finds it still in the port (no worker dequeued it yet) sets owner to null and
// leaves it to whichever worker dequeues it, which frees it.
struct IocpTimerQueue::Packet {
  using State = PacketState;

  OVERLAPPED overlapped{};  // first: a worker gets the packet back from the OVERLAPPED address
  SRWLOCK lock = SRWLOCK_INIT;
  IocpTimerQueue* owner = nullptr;  // guarded by lock; null once its queue has let go of it
  State state = State::Idle;        // guarded by lock; changed by a live owner under m_mutex too

  void Set(State newState) noexcept {
    ::AcquireSRWLockExclusive(&lock);
    state = newState;
    ::ReleaseSRWLockExclusive(&lock);
  }
};

static_assert(std::is_same_v<ULONG_PTR, std::uintptr_t> && std::is_same_v<HANDLE, void*>,
              "the header spells ULONG_PTR and HANDLE as std::uintptr_t and void*");

namespace {

// Every queue's packets carry this key, so a worker recognises one without knowing which queue
// posted it (and even after that queue is gone).
const char kPacketKeyTag = 0;

ULONG_PTR PacketKey() noexcept { return reinterpret_cast<ULONG_PTR>(&kPacketKeyTag); }

}  // namespace

IocpTimerQueue::IocpTimerQueue(void* completionPort, IManageTimerQueue& queue,
                               IocpTimerQueueOptions options)
    : DispatchThread(queue, options.monitor),
      m_port(completionPort),
      m_options(std::move(options)),
      m_packet(nullptr) {
  if (m_options.callbacksPerPacket == 0) {
    throw std::invalid_argument("IocpTimerQueue: callbacksPerPacket must be at least 1");
  }
  if (m_port == nullptr || m_port == INVALID_HANDLE_VALUE) {
    throw std::invalid_argument("IocpTimerQueue: the completion port handle is not valid");
  }
  m_packet = new Packet;
  m_packet->owner = this;
  StartThread();
}

IocpTimerQueue::~IocpTimerQueue() {
  StopThread();
  Lock lock(m_mutex);
  // Waits only while a worker is running this queue's callbacks (it stops after the one in hand);
  // a packet still in the port is handed over at once.
  m_wake.wait(lock, [this] { return Quiesce(); });
  delete m_packet;  // null if Quiesce left it in the port
}

void IocpTimerQueue::Dispatch(Lock& lock) {
  if (!m_queue.BeginTimeoutHandling()) return;
  m_batchInFlight = true;
  if (const unsigned long error = TryPost(Packet::State::Idle)) {
    BeginShutdown();
    EndBatch();
    lock.unlock();  // the error handler runs without the lock, as for a callback's error
    ReportPostFailure(error);
    lock.lock();
    return;
  }
  // The workers run the batch; wait for the last of them to end it, or for a shutdown (which
  // must not depend on a worker coming: the destructor takes the batch back if need be).
  m_wake.wait(lock, [this] { return !m_batchInFlight || ShutdownRequested(); });
}

bool IocpTimerQueue::Quiesce() {
  if (!m_batchInFlight) return true;
  Packet& packet = *m_packet;
  ::AcquireSRWLockExclusive(&packet.lock);
  if (packet.state != Packet::State::Queued) {
    ::ReleaseSRWLockExclusive(&packet.lock);
    return false;  // a worker is running the batch: it ends it after the callback in hand
  }
  // In the port, not yet dequeued: from now on the packet belongs to the worker that dequeues it.
  packet.owner = nullptr;
  ::ReleaseSRWLockExclusive(&packet.lock);
  m_packet = nullptr;
  m_queue.EndTimeoutHandling();  // undispatched expiries stay in the queue, as after any shutdown
  m_batchInFlight = false;
  return true;
}

bool IocpTimerQueue::HandleCompletion(std::uintptr_t completionKey,
                                      _OVERLAPPED* overlapped) noexcept {
  static_assert(std::is_standard_layout_v<Packet>,
                "the OVERLAPPED must sit at the packet's address");
  if (completionKey != PacketKey() || overlapped == nullptr) return false;
  auto* packet = reinterpret_cast<Packet*>(overlapped);
  ::AcquireSRWLockExclusive(&packet->lock);
  IocpTimerQueue* owner = packet->owner;
  if (owner == nullptr) {  // its queue shut down while it sat in the port
    ::ReleaseSRWLockExclusive(&packet->lock);
    delete packet;
    return true;
  }
  packet->state = Packet::State::Running;
  ::ReleaseSRWLockExclusive(&packet->lock);
  owner->RunBatch();
  return true;
}

void IocpTimerQueue::RunBatch() noexcept {
  const std::size_t budget = m_options.callbacksPerPacket;
  std::size_t handled = 0;
  bool exhausted = false;
  CallbackScope scope(*this);  // WaitForShutdownToComplete or destruction from a callback
  // One callback at a time, so that a shutdown stops it after the one in hand (a call for the
  // whole budget would run up to callbacksPerPacket of them first).
  while (!exhausted && handled < budget && !ShutdownRequested()) {
    try {
      if (m_queue.HandleTimeout(1) == 0) {
        exhausted = true;
      } else {
        ++handled;
      }
    } catch (...) {
      ++handled;  // the callback that threw counts as dispatched
      ReportCallbackError(m_options.onCallbackError, std::current_exception());
    }
  }
  unsigned long error = 0;
  {
    // More may remain: re-post, so that other completions have a turn first. Under the lock, so
    // that a shutdown sees either this worker running or the packet in the port, never neither.
    Lock lock(m_mutex);
    if (!exhausted && !ShutdownRequested()) {
      error = TryPost(Packet::State::Running);
      if (error == 0) {
        m_wake.notify_all();  // a waiting shutdown may now take the packet back
        return;               // the packet, and with it the batch, may be another worker's now
      }
    }
  }
  if (error != 0) {
    ReportPostFailure(error);  // without the lock; still Running, so this object stays alive
    BeginShutdown();
  }
  EndBatch();  // the last use of this object
}

void IocpTimerQueue::EndBatch() noexcept {
  // Notify with the lock held and touch nothing after it is released: the moment the destructor
  // (or WaitForShutdownToComplete) sees the batch ended, this object may be destroyed.
  Lock lock(m_mutex);
  m_queue.EndTimeoutHandling();  // undispatched expiries (after a shutdown) stay in the queue
  m_batchInFlight = false;
  m_packet->Set(Packet::State::Idle);
  m_wake.notify_all();
}

unsigned long IocpTimerQueue::TryPost(PacketState onFailure) noexcept {
  // Lock held. Queued before it is posted: a worker may dequeue it at once.
  m_packet->Set(Packet::State::Queued);
  if (::PostQueuedCompletionStatus(m_port, 0, PacketKey(), &m_packet->overlapped)) return 0;
  const DWORD error = ::GetLastError();
  m_packet->Set(onFailure);  // not in the port after all
  return error != 0 ? error : ERROR_INVALID_HANDLE;
}

void IocpTimerQueue::ReportPostFailure(unsigned long error) noexcept {
  // Nothing can run the callbacks now (the port is gone). The caller stops dispatching (posting
  // again would fail the same way, in a loop) and ends the dispatch: the expiries stay due.
  ReportCallbackError(m_options.onCallbackError,
                      std::make_exception_ptr(std::system_error(
                          static_cast<int>(error), std::system_category(),
                          "IocpTimerQueue: PostQueuedCompletionStatus failed; dispatch stopped")));
}

}  // namespace timerwheel
