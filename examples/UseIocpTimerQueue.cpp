// The README's IocpTimerQueue example (Windows only): timer callbacks run on the server's own I/O
// completion port worker threads.
// [readme]
#include <cstdio>
#include <functional>
#include <thread>

#include "TimerQueue/IocpTimerQueue.h"  // includes <windows.h>
#include "TimerWheel/TimerWheel.h"

constexpr ULONG_PTR kQuitKey = 1;  // one of the server's own completion keys

void Worker(HANDLE port, timerwheel::IocpTimerQueue& timers) {
  for (;;) {
    DWORD bytes = 0;
    ULONG_PTR key = 0;
    OVERLAPPED* overlapped = nullptr;
    ::GetQueuedCompletionStatus(port, &bytes, &key, &overlapped, INFINITE);
    if (timers.HandleCompletion(key, overlapped)) continue;  // a timer packet: callbacks ran
    if (key == kQuitKey) return;
    // ... the server's own I/O completions ...
  }
}

struct Flush final : timerwheel::ITimer {  // runs on a worker thread
  void OnTimer(timerwheel::UserData port) override {
    std::printf("flushing delayed ACKs\n");
    ::PostQueuedCompletionStatus(reinterpret_cast<HANDLE>(port), 0, kQuitKey, nullptr);  // demo
  }
};

int main() {
  HANDLE port = ::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0);
  {
    timerwheel::TimerWheel wheel;
    timerwheel::IocpTimerQueue timers(port, wheel);  // posts expiries to the port
    Flush flush;
    timers.SetOneShotTimer(flush, 40, reinterpret_cast<timerwheel::UserData>(port));
    std::thread worker(Worker, port, std::ref(timers));
    worker.join();  // the worker has ended the timer batch before it saw kQuitKey
  }
  ::CloseHandle(port);
}
// [/readme]
