// IocpTimerQueue shuts down in every order a server uses, with its packet still in the port:
// nothing hangs, no callback runs, and a packet that outlives its queue is recognised and freed by
// whichever worker dequeues it. Every wait is bounded; a destructor that hangs fails the test.
#ifdef _WIN32

#include <windows.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "Support/FunctionTimer.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "TimerQueue/IocpTimerQueue.h"
#include "TimerQueue/SystemTickProvider.h"
#include "TimerWheel/TimerWheel.h"

using namespace timerwheel;
using namespace timerwheel::test;

namespace {

constexpr DWORD kWaitMs = 20'000;
constexpr ULONG_PTR kQuitKey = 0x51;

struct Completion {
  BOOL ok = FALSE;
  DWORD bytes = 0;
  ULONG_PTR key = 0;
  OVERLAPPED* overlapped = nullptr;
};

Completion Dequeue(HANDLE port, DWORD timeoutMs) {
  Completion c;
  c.ok = ::GetQueuedCompletionStatus(port, &c.bytes, &c.key, &c.overlapped, timeoutMs);
  return c;
}

// Runs `destroy` on another thread and fails (ending the process: a hung destructor cannot be
// abandoned) if it has not returned within the bound.
template <class F>
void MustReturnPromptly(const char* what, F destroy) {
  auto done = std::async(std::launch::async, destroy);
  if (done.wait_for(std::chrono::milliseconds(kWaitMs)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not return within %lu ms\n", what,
                 static_cast<unsigned long>(kWaitMs));
    std::fflush(stderr);
    std::_Exit(3);
  }
  done.get();
}

// A port, a wheel and an IocpTimerQueue whose timer thread has posted a packet for a due timer
// that no worker has handled: the packet is in the port.
struct PacketInPort {
  HANDLE port = ::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0);
  CountingTimerQueueMonitor monitor;
  TimerWheel wheel{TimerWheelOptions{}, SystemTickProvider::Instance()};
  std::atomic<int> callbacks{0};
  FunctionTimer timer{[this](UserData) { ++callbacks; }};
  std::unique_ptr<IocpTimerQueue> timers;

  PacketInPort() {
    REQUIRE(port != nullptr);
    IocpTimerQueueOptions options;
    options.monitor = &monitor;
    timers = std::make_unique<IocpTimerQueue>(port, wheel, options);
    timers->SetOneShotTimer(timer, 0, 0);
    // Take the packet out to see that it was posted, then put it back exactly as it was: to the
    // queue it has never left the port.
    const Completion c = Dequeue(port, kWaitMs);
    REQUIRE(c.ok);
    REQUIRE(c.overlapped != nullptr);
    REQUIRE(::PostQueuedCompletionStatus(port, c.bytes, c.key, c.overlapped));
  }
  ~PacketInPort() {
    if (port != nullptr) ::CloseHandle(port);
  }
};

}  // namespace

TEST_CASE("IOCP: destroying the queue while no worker serves the port does not hang", "[iocp]") {
  PacketInPort f;
  MustReturnPromptly("~IocpTimerQueue", [&] { f.timers.reset(); });
  CHECK(f.callbacks == 0);
  // The packet outlived its queue. A worker that dequeues it later recognises it and frees it.
  const Completion c = Dequeue(f.port, kWaitMs);
  REQUIRE(c.ok);
  CHECK(IocpTimerQueue::HandleCompletion(c.key, c.overlapped));
  CHECK(f.callbacks == 0);
  // Nothing else was left behind, and the one-shot timer is still the wheel's (it never fired).
  CHECK_FALSE(Dequeue(f.port, 0).ok);
  CHECK(f.monitor.Fired() == 0);
  f.wheel.CheckInvariants();
}

TEST_CASE("IOCP: closing the port with the packet in it, then destroying the queue, does not hang",
          "[iocp]") {
  PacketInPort f;
  REQUIRE(::CloseHandle(f.port));  // releases any worker; the packet goes with the port
  f.port = nullptr;
  MustReturnPromptly("~IocpTimerQueue", [&] { f.timers.reset(); });
  CHECK(f.callbacks == 0);
  CHECK(f.monitor.Fired() == 0);
  f.wheel.CheckInvariants();
}

TEST_CASE("IOCP: workers told to quit before the queue is destroyed, with a packet in flight",
          "[iocp]") {
  PacketInPort f;
  // Two workers running the documented loop; they quit on kQuitKey, which the server posts
  // before any packet of the queue: they never see the timer packet.
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i) {
    REQUIRE(::PostQueuedCompletionStatus(f.port, 0, kQuitKey, nullptr));
  }
  // The packet is ahead of the quit keys in the port (FIFO), so take it out and put it last.
  const Completion packet = Dequeue(f.port, kWaitMs);
  REQUIRE(packet.overlapped != nullptr);
  std::atomic<int> quitSeen{0};
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([&] {
      for (;;) {
        const Completion c = Dequeue(f.port, kWaitMs);
        if (!c.ok && c.overlapped == nullptr) return;  // closed port or timeout: give up
        if (IocpTimerQueue::HandleCompletion(c.key, c.overlapped)) continue;
        if (c.key == kQuitKey) {
          ++quitSeen;
          return;
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  REQUIRE(quitSeen == 2);
  REQUIRE(::PostQueuedCompletionStatus(f.port, packet.bytes, packet.key, packet.overlapped));
  MustReturnPromptly("~IocpTimerQueue", [&] { f.timers.reset(); });
  CHECK(f.callbacks == 0);
  // A worker started later (or another queue's) frees the orphaned packet and runs nothing.
  const Completion late = Dequeue(f.port, kWaitMs);
  REQUIRE(late.ok);
  CHECK(IocpTimerQueue::HandleCompletion(late.key, late.overlapped));
  CHECK(f.callbacks == 0);
  f.wheel.CheckInvariants();
}

TEST_CASE("IOCP: the clean order stops dispatch while workers serve the port", "[iocp]") {
  HANDLE port = ::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0);
  REQUIRE(port != nullptr);
  CountingTimerQueueMonitor monitor;
  TimerWheel wheel{TimerWheelOptions{}, SystemTickProvider::Instance()};
  std::atomic<bool> stopped{false};
  std::atomic<int> afterStop{0};
  std::atomic<int> fired{0};
  std::promise<void> firstFired;
  FunctionTimer timer([&](UserData) {
    if (stopped) ++afterStop;
    if (fired++ == 0) firstFired.set_value();
  });
  IocpTimerQueueOptions options;
  options.callbacksPerPacket = 1;  // the packet hops between workers
  options.monitor = &monitor;
  auto timers = std::make_unique<IocpTimerQueue>(port, wheel, options);
  std::vector<std::thread> workers;
  for (int i = 0; i < 3; ++i) {
    workers.emplace_back([port] {
      for (;;) {
        const Completion c = Dequeue(port, INFINITE);
        if (!c.ok && c.overlapped == nullptr) return;
        if (IocpTimerQueue::HandleCompletion(c.key, c.overlapped)) continue;
        if (c.key == kQuitKey) return;
      }
    });
  }
  for (int i = 0; i < 500; ++i) timers->SetOneShotTimer(timer, static_cast<Milliseconds>(i % 5), 0);
  REQUIRE(firstFired.get_future().wait_for(std::chrono::milliseconds(kWaitMs)) ==
          std::future_status::ready);
  // 1. stop dispatch while the workers still serve the port.
  timers->BeginShutdown();
  REQUIRE(timers->WaitForShutdownToComplete(std::chrono::milliseconds(kWaitMs)));
  stopped = true;
  const int firedAtStop = fired;
  // 2. stop the workers, 3. destroy the queue, 4. close the port.
  for (std::size_t i = 0; i < workers.size(); ++i) {
    REQUIRE(::PostQueuedCompletionStatus(port, 0, kQuitKey, nullptr));
  }
  for (std::thread& worker : workers) worker.join();
  MustReturnPromptly("~IocpTimerQueue", [&] { timers.reset(); });
  REQUIRE(::CloseHandle(port));
  CHECK(afterStop == 0);
  CHECK(fired == firedAtStop);
  wheel.CheckInvariants();
}

#endif  // _WIN32
