// IocpTimerQueue (Windows only): timer expirations are handed to an I/O completion port, so the
// server's own IOCP worker threads run the timer callbacks.
#pragma once

#ifndef _WIN32
#error "IocpTimerQueue is for Windows; use ThreadedTimerQueue or AsioTimerQueue elsewhere"
#endif

#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <cstddef>

#include "TimerQueue/Detail/DispatchThread.h"
#include "TimerQueue/DriverOptions.h"

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
// A worker loop:
//
//   for (;;) {
//     DWORD bytes; ULONG_PTR key; OVERLAPPED* overlapped;
//     BOOL ok = GetQueuedCompletionStatus(port, &bytes, &key, &overlapped, INFINITE);
//     if (timers.HandleCompletion(key, overlapped)) continue;   // a timer packet: done
//     if (key == kQuitKey) break;
//     ... the server's own I/O completion ...
//   }
//
// Ground rules (locking): see detail::DispatchThread; m_batchInFlight is guarded by its mutex.
// Callbacks run without the lock and may call any method, on any timer.
// Shutdown: BeginShutdown stops the timer thread; a packet still in the port is consumed by the
// next worker that dequeues it without running callbacks. Timers still pending never fire.
// WaitForShutdownToComplete returns true once the thread has stopped and no packet is in flight;
// after that no callback runs. Keep at least one worker dequeuing until then: the destructor
// waits for the packet.
class IocpTimerQueue final : public detail::DispatchThread {
 public:
  IocpTimerQueue(HANDLE completionPort, IManageTimerQueue& queue,
                 IocpTimerQueueOptions options = {});
  ~IocpTimerQueue() override;

  // For worker threads: true if (key, overlapped) is this queue's packet, which it then handles.
  bool HandleCompletion(ULONG_PTR completionKey, OVERLAPPED* overlapped) noexcept;

 private:
  void Dispatch(Lock& lock) override;
  bool IsIdle() const override { return !m_batchInFlight; }
  void Post() noexcept;
  void EndBatch() noexcept;

  HANDLE m_port;
  const IocpTimerQueueOptions m_options;
  OVERLAPPED m_packet{};         // its address identifies our packets; the key is `this`
  bool m_batchInFlight = false;  // guarded by m_mutex: a packet is in the port or being handled
};

}  // namespace timerwheel
