// The sans-I/O engine behind the mutex that makes it safe to call from any thread: one per
// endpoint, or one per shard of an endpoint (EndpointOptions::shards).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#include "ReliableUDP/Detail/EndpointCore.h"
#include "TimerQueue/ITimer.h"

namespace timerwheel::rudp::detail {

// Ground rules (locking): Mutex() guards Core(), every ConnectionCore of it (and so the chunk
// pool and scratch buffers they share) and, in the Asio endpoint, the shard's send path (the
// socket itself: Endpoint.cpp).
// Endpoint and Connection take it around each call into the engine; timer expiries arrive here
// (this is the engine's timer sink) and take it before they reach the engine. Lock order: this
// mutex, then the timer driver's own lock (the engine arms timers from inside its calls), so the
// driver must dispatch without its lock (DispatchPolicy::WithoutLock). User handlers never run
// under it: the engine posts them through IEndpointIo::Post. Nor are they destroyed under it (one
// may hold the last reference to a Connection, whose destructor takes it): a call that the engine
// fails before it has taken the handler leaves it with the caller, which holds it in a local made
// before the Call and so destroys it after the unlock (Connection.cpp, Endpoint.cpp). Every call
// into the engine holds the mutex through a Call, which ends it with IEndpointIo::Flush (still
// under the mutex), so the datagrams one call produced leave together (batched I/O) and none is
// left behind.
class LockedEngine final : public ITimer {
 public:
  LockedEngine(IEndpointIo& io, ITimerQueue& timers, Milliseconds timerGranularity,
               const EndpointOptions& options, ShardRole shard = {})
      : m_io(io), m_core(io, timers, timerGranularity, options, this, shard) {}

  // One call into the engine: holds the mutex; on the way out flushes the I/O, then unlocks.
  class Call {
   public:
    explicit Call(LockedEngine& engine, IEndpointIo::BatchEnd end = IEndpointIo::BatchEnd::Call)
        : m_engine(engine), m_end(end), m_lock(engine.Lock()) {}
    ~Call() { m_engine.m_io.Flush(m_end); }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    LockedEngine& m_engine;
    IEndpointIo::BatchEnd m_end;
    std::unique_lock<std::mutex> m_lock;  // released after the destructor's body: after Flush
  };

  // The mutex, locked; the time spent waiting for it is counted (WaitMicroseconds). Only a lock
  // that is not free at once reads the clock.
  std::unique_lock<std::mutex> Lock() {
    std::unique_lock<std::mutex> lock(m_mutex, std::try_to_lock);
    if (lock.owns_lock()) return lock;
    const auto start = std::chrono::steady_clock::now();
    lock.lock();
    AddWait(start);
    return lock;
  }
  // Counts the time since `start` as waiting for this engine (a lock, or a turn).
  void AddWait(std::chrono::steady_clock::time_point start) noexcept {
    const auto waited = std::chrono::steady_clock::now() - start;
    m_waitMicroseconds.fetch_add(
        static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(waited).count()),
        std::memory_order_relaxed);
  }
  std::uint64_t WaitMicroseconds() const noexcept {
    return m_waitMicroseconds.load(std::memory_order_relaxed);
  }

  ~LockedEngine() {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_core.Shutdown();
  }
  LockedEngine(const LockedEngine&) = delete;
  LockedEngine& operator=(const LockedEngine&) = delete;

  std::mutex& Mutex() noexcept { return m_mutex; }
  EndpointCore& Core() noexcept { return m_core; }  // with Mutex() held

  void OnTimer(UserData userData) override {
    Call call(*this, IEndpointIo::BatchEnd::TimerExpiry);
    m_core.OnTimer(userData);
  }

 private:
  IEndpointIo& m_io;
  std::mutex m_mutex;
  std::atomic<std::uint64_t> m_waitMicroseconds{0};
  EndpointCore m_core;
};

}  // namespace timerwheel::rudp::detail
