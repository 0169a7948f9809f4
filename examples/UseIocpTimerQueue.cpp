// The README's IocpTimerQueue example (Windows only): timer callbacks run on the server's own I/O
// completion port worker threads.
// [readme]
#include <windows.h>  // the server's own include; IocpTimerQueue.h includes no Windows header

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "TimerQueue/IocpTimerQueue.h"
#include "TimerWheel/TimerWheel.h"

constexpr ULONG_PTR kQuitKey = 1;  // one of the server's own completion keys

void Worker(HANDLE port) {
  for (;;) {
    DWORD bytes = 0;
    ULONG_PTR key = 0;
    OVERLAPPED* overlapped = nullptr;
    const BOOL ok = ::GetQueuedCompletionStatus(port, &bytes, &key, &overlapped, INFINITE);
    if (!ok && overlapped == nullptr) return;  // the port was closed: nothing more will come
    if (timerwheel::IocpTimerQueue::HandleCompletion(key, overlapped)) continue;  // timers ran
    if (key == kQuitKey) return;
    // ... the server's own I/O completions (ok == FALSE: that I/O failed) ...
  }
}

struct Flush final : timerwheel::ITimer {  // runs on a worker thread
  void OnTimer(timerwheel::UserData) override {
    std::printf("flushing delayed ACKs\n");
    flushed.set_value();
  }
  std::promise<void> flushed;
};

int main() {
  HANDLE port = ::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0);
  if (port == nullptr) return std::printf("CreateIoCompletionPort: %lu\n", ::GetLastError()), 1;
  {
    timerwheel::TimerWheel wheel;
    timerwheel::IocpTimerQueue timers(port, wheel);  // posts expiries to the port
    std::thread worker(Worker, port);
    Flush flush;
    timers.SetOneShotTimer(flush, 40, 0);
    flush.flushed.get_future().wait();
    // The clean order: stop dispatch while the worker still serves the port, then stop the
    // worker, then destroy the queue (end of scope), then close the port.
    timers.BeginShutdown();
    timers.WaitForShutdownToComplete(std::chrono::seconds(10));
    ::PostQueuedCompletionStatus(port, 0, kQuitKey, nullptr);
    worker.join();
  }
  ::CloseHandle(port);
}
// [/readme]
