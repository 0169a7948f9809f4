// The sans-I/O engine behind the one mutex that makes it safe to call from any thread.
#pragma once

#include <mutex>

#include "ReliableUDP/Detail/EndpointCore.h"
#include "TimerQueue/ITimer.h"

namespace timerwheel::rudp::detail {

// Ground rules (locking): Mutex() guards Core(), every ConnectionCore of it (and so the chunk
// pool and scratch buffers they share) and, in the Asio endpoint, every operation on the socket.
// Endpoint and Connection take it around each call into the engine; timer expiries arrive here
// (this is the engine's timer sink) and take it before they reach the engine. Lock order: this
// mutex, then the timer driver's own lock (the engine arms timers from inside its calls), so the
// driver must dispatch without its lock (DispatchPolicy::WithoutLock). User handlers never run
// under it: the engine posts them through IEndpointIo::Post. Every call into the engine holds
// the mutex through a Call, which ends it with IEndpointIo::Flush (still under the mutex), so the
// datagrams one call produced leave together (batched I/O) and none is left behind.
class LockedEngine final : public ITimer {
 public:
  LockedEngine(IEndpointIo& io, ITimerQueue& timers, Milliseconds timerGranularity,
               const EndpointOptions& options)
      : m_io(io), m_core(io, timers, timerGranularity, options, this) {}

  // One call into the engine: holds the mutex; on the way out flushes the I/O, then unlocks.
  class Call {
   public:
    explicit Call(LockedEngine& engine, IEndpointIo::BatchEnd end = IEndpointIo::BatchEnd::Call)
        : m_engine(engine), m_end(end), m_lock(engine.m_mutex) {}
    ~Call() { m_engine.m_io.Flush(m_end); }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    LockedEngine& m_engine;
    IEndpointIo::BatchEnd m_end;
    std::lock_guard<std::mutex> m_lock;  // released after the destructor's body: after Flush
  };

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
  EndpointCore m_core;
};

}  // namespace timerwheel::rudp::detail
