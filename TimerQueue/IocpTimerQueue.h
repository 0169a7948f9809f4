// IocpTimerQueue (Windows only): timer expirations are handed to an I/O completion port, so the
// server's own IOCP worker threads run the timer callbacks.
#pragma once

#ifndef _WIN32
#error "IocpTimerQueue is for Windows; use ThreadedTimerQueue or AsioTimerQueue elsewhere"
#endif

#include <cstddef>
#include <cstdint>

#include "TimerQueue/Detail/DispatchThread.h"
#include "TimerQueue/DriverOptions.h"

// No Windows header here: <windows.h> included from a library header decides, for the whole
// translation unit, whether <winsock.h> comes in (which breaks a later <winsock2.h> or Boost.Asio)
// and whether min/max are macros. OVERLAPPED is declared by its tag, as the SDK defines it;
// HANDLE is void* and ULONG_PTR is std::uintptr_t on x64, so callers pass theirs unchanged.
struct _OVERLAPPED;  // NOLINT(bugprone-reserved-identifier): the Windows SDK's own tag

namespace timerwheel {

struct IocpTimerQueueOptions : DriverOptions {
  // Callbacks one worker runs per packet before re-posting it, so that timer work and I/O
  // completions take turns on the port.
  std::size_t callbacksPerPacket = 64;
};

// A timer thread sleeps until the next expiry, detaches everything due (Begin) and posts one
// packet to the port with PostQueuedCompletionStatus. A worker that dequeues it passes it to
// HandleCompletion, which runs up to callbacksPerPacket callbacks from the batch's timed-out
// copies (without the lock) and re-posts the packet if more remain; the last one ends the
// dispatch (End) and lets the timer thread go on. So callbacks run on the port's worker threads,
// one batch at a time, in firing order, under the same dual-data contract as every other driver.
//
// A worker loop (HandleCompletion is static: it finds the queue through the packet, so the loop
// needs no pointer to the queue, and several queues may share one port):
//
//   for (;;) {
//     DWORD bytes = 0; ULONG_PTR key = 0; OVERLAPPED* overlapped = nullptr;
//     BOOL ok = GetQueuedCompletionStatus(port, &bytes, &key, &overlapped, INFINITE);
//     if (!ok && overlapped == nullptr) break;  // the port was closed (or the wait failed)
//     if (IocpTimerQueue::HandleCompletion(key, overlapped)) continue;  // a timer packet: done
//     if (key == kQuitKey) break;
//     ... the server's own I/O completion ...
//   }
//
// Ground rules (locking): see detail::DispatchThread; m_batchInFlight and the packet's state
// change under m_mutex (the packet's own lock nested inside it). A worker that dequeues the
// packet takes only the packet's lock to learn whether its queue still exists.
// Callbacks run without the lock and may call any method, on any timer.
//
// Shutdown is safe in every order a server uses, and never waits for a worker to come:
//  - The packet is a small block of its own, not part of this object. While it sits in the port
//    it refers to no queue that may be gone: a shutdown that finds it there (not yet dequeued)
//    takes the batch back, ends it (the expiries stay due, as after any shutdown) and leaves the
//    block to the worker that dequeues it, which frees it and runs nothing. If no worker ever
//    dequeues it (workers stopped, or the port closed), the block (under 100 bytes) is never
//    freed: the price of never hanging.
//  - WaitForShutdownToComplete(timeout) returns true once the thread has stopped and no worker
//    is running this queue's callbacks; after that no callback runs. It waits only for a
//    callback that is running; it does not need workers to keep dequeuing.
//  - The destructor stops the thread and waits only for a callback that is running on a worker.
// The clean order (examples/IocpUdpEchoServer.cpp): BeginShutdown and WaitForShutdownToComplete,
// then stop the workers, destroy the queue, close the port.
class IocpTimerQueue final : public detail::DispatchThread {
 public:
  // completionPort is a HANDLE from CreateIoCompletionPort; the caller owns it.
  IocpTimerQueue(void* completionPort, IManageTimerQueue& queue,
                 IocpTimerQueueOptions options = {});
  ~IocpTimerQueue() override;

  // For worker threads: true if (key, overlapped) is a packet of any IocpTimerQueue, which it then
  // handles (or, if its queue has been destroyed, frees). false: the completion is the caller's.
  static bool HandleCompletion(std::uintptr_t completionKey, _OVERLAPPED* overlapped) noexcept;

 private:
  struct Packet;
  // Where the packet is: with its queue, in the port, or with a worker running the batch.
  enum class PacketState { Idle, Queued, Running };

  void Dispatch(Lock& lock) override;
  bool Quiesce() override;
  void RunBatch() noexcept;
  void EndBatch() noexcept;
  // Lock held: posts the packet; 0, or the Windows error (the packet's state is then onFailure).
  unsigned long TryPost(PacketState onFailure) noexcept;
  void ReportPostFailure(unsigned long error) noexcept;

  void* m_port;
  const IocpTimerQueueOptions m_options;
  Packet* m_packet;              // owned here until a shutdown leaves it in the port
  bool m_batchInFlight = false;  // guarded by m_mutex: a batch is begun and not yet ended
};

}  // namespace timerwheel
