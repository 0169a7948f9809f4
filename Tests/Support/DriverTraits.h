// Traits for the driver tests: a driver (threaded, Asio, IOCP) over an implementation (heap,
// wheel) with a dispatch policy. Each provides a Harness that owns whatever runs the driver.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "Support/QueueTraits.h"
#include "TimerQueue/AsioTimerQueue.h"
#include "TimerQueue/CallbackErrorHandler.h"
#include "TimerQueue/DispatchPolicy.h"
#include "TimerQueue/ThreadedTimerQueue.h"
#ifdef _WIN32
#include "TimerQueue/IocpTimerQueue.h"
#endif

namespace timerwheel::test {

// What every harness offers the tests, given its driver.
template <class Driver>
class HarnessBase {
 public:
  ITimerQueue& Queue() { return *m_driver; }
  void BeginShutdown() { m_driver->BeginShutdown(); }
  // Stops dispatch; true if it stopped within the timeout.
  bool Shutdown(std::chrono::milliseconds timeout) {
    m_driver->BeginShutdown();
    return m_driver->WaitForShutdownToComplete(timeout);
  }
  // The wait alone, without a BeginShutdown.
  bool WaitForShutdownToComplete(std::chrono::milliseconds timeout) {
    return m_driver->WaitForShutdownToComplete(timeout);
  }

 protected:
  std::unique_ptr<Driver> m_driver;
};

template <class QueueTraitsT, DispatchPolicy kPolicyV>
struct ThreadedDriverTraits {
  using QueueTraits = QueueTraitsT;
  static constexpr DispatchPolicy kPolicy = kPolicyV;

  class Harness : public HarnessBase<ThreadedTimerQueue> {
   public:
    Harness(IManageTimerQueue& queue, ITimerQueueMonitor* monitor, CallbackErrorHandler onError) {
      ThreadedTimerQueueOptions options;
      options.dispatchPolicy = kPolicy;
      options.monitor = monitor;
      options.onCallbackError = std::move(onError);
      m_driver = std::make_unique<ThreadedTimerQueue>(queue, options);
    }
  };
};

// The Asio driver on an io_context run by two threads (so dispatch and sets really race).
template <class QueueTraitsT, DispatchPolicy kPolicyV>
struct AsioDriverTraits {
  using QueueTraits = QueueTraitsT;
  static constexpr DispatchPolicy kPolicy = kPolicyV;

  class Harness : public HarnessBase<AsioTimerQueue> {
   public:
    Harness(IManageTimerQueue& queue, ITimerQueueMonitor* monitor, CallbackErrorHandler onError) {
      AsioTimerQueueOptions options;
      options.dispatchPolicy = kPolicy;
      options.monitor = monitor;
      options.onCallbackError = std::move(onError);
      m_driver = std::make_unique<AsioTimerQueue>(m_ioContext, queue, options);
      for (int i = 0; i < 2; ++i) m_threads.emplace_back([this] { m_ioContext.run(); });
    }
    ~Harness() {
      m_driver.reset();
      m_work.reset();
      for (std::thread& thread : m_threads) thread.join();
    }

   private:
    boost::asio::io_context m_ioContext;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> m_work{
        m_ioContext.get_executor()};
    std::vector<std::thread> m_threads;
  };
};

#ifdef _WIN32
// The IOCP driver with a completion port served by three worker threads, the way a server runs.
template <class QueueTraitsT>
struct IocpDriverTraits {
  using QueueTraits = QueueTraitsT;

  class Harness : public HarnessBase<IocpTimerQueue> {
   public:
    static constexpr ULONG_PTR kQuitKey = 0x51;

    Harness(IManageTimerQueue& queue, ITimerQueueMonitor* monitor, CallbackErrorHandler onError)
        : m_port(::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0)) {
      if (m_port == nullptr) throw std::runtime_error("CreateIoCompletionPort failed");
      IocpTimerQueueOptions options;
      options.monitor = monitor;
      options.onCallbackError = std::move(onError);
      options.callbacksPerPacket = 2;  // small, so batches hop between workers
      m_driver = std::make_unique<IocpTimerQueue>(m_port, queue, options);
      for (int i = 0; i < 3; ++i) m_workers.emplace_back([this] { Work(); });
    }
    ~Harness() {
      // The workers must keep serving the port until no timer packet is in flight.
      Shutdown(std::chrono::minutes(1));
      for (std::size_t i = 0; i < m_workers.size(); ++i) {
        ::PostQueuedCompletionStatus(m_port, 0, kQuitKey, nullptr);
      }
      for (std::thread& worker : m_workers) worker.join();
      m_driver.reset();
      ::CloseHandle(m_port);
    }

   private:
    void Work() {
      for (;;) {
        DWORD bytes = 0;
        ULONG_PTR key = 0;
        OVERLAPPED* overlapped = nullptr;
        ::GetQueuedCompletionStatus(m_port, &bytes, &key, &overlapped, INFINITE);
        if (m_driver->HandleCompletion(key, overlapped)) continue;
        if (key == kQuitKey) return;
      }
    }

    HANDLE m_port;
    std::vector<std::thread> m_workers;
  };
};
#endif

using ThreadedHeapWithoutLock = ThreadedDriverTraits<HeapTraits, DispatchPolicy::WithoutLock>;
using ThreadedHeapWithLockHeld = ThreadedDriverTraits<HeapTraits, DispatchPolicy::WithLockHeld>;
using ThreadedWheelWithoutLock = ThreadedDriverTraits<WheelTraits, DispatchPolicy::WithoutLock>;
using ThreadedWheelWithLockHeld = ThreadedDriverTraits<WheelTraits, DispatchPolicy::WithLockHeld>;

using AsioHeapWithoutLock = AsioDriverTraits<HeapTraits, DispatchPolicy::WithoutLock>;
using AsioWheelWithoutLock = AsioDriverTraits<WheelTraits, DispatchPolicy::WithoutLock>;
using AsioWheelWithLockHeld = AsioDriverTraits<WheelTraits, DispatchPolicy::WithLockHeld>;

}  // namespace timerwheel::test

#ifdef _WIN32
namespace timerwheel::test {
using IocpHeap = IocpDriverTraits<HeapTraits>;
using IocpWheel = IocpDriverTraits<WheelTraits>;
}  // namespace timerwheel::test
#define TIMERWHEEL_WINDOWS_DRIVER_TRAITS , timerwheel::test::IocpHeap, timerwheel::test::IocpWheel
#else
#define TIMERWHEEL_WINDOWS_DRIVER_TRAITS
#endif

#define TIMERWHEEL_ALL_DRIVER_TRAITS                                                           \
  timerwheel::test::ThreadedHeapWithoutLock, timerwheel::test::ThreadedHeapWithLockHeld,       \
      timerwheel::test::ThreadedWheelWithoutLock, timerwheel::test::ThreadedWheelWithLockHeld, \
      timerwheel::test::AsioHeapWithoutLock, timerwheel::test::AsioWheelWithoutLock,           \
      timerwheel::test::AsioWheelWithLockHeld TIMERWHEEL_WINDOWS_DRIVER_TRAITS
