// Boost.Asio's waitable timer, one per timer, on an io_context polled by the workload, with the
// benchmark's virtual clock (basic_waitable_timer<BenchmarkChronoClock>): the same code path as
// steady_timer, only the clock differs.
#pragma once

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <vector>

#include "BenchmarkClock.h"

namespace timerwheel::perf {

class AsioSteadyTimerAdapter {
 public:
  static constexpr bool kVirtualTime = true;
  using Timer = boost::asio::basic_waitable_timer<BenchmarkChronoClock>;

  AsioSteadyTimerAdapter(std::size_t capacity, FiringLog& log) : m_log(log) {
    m_timers.reserve(capacity);
  }

  std::size_t Create() {
    m_timers.push_back(std::make_unique<Timer>(m_io));
    return m_timers.size() - 1;
  }
  void Arm(std::size_t timer, Milliseconds timeout) {
    Timer& t = *m_timers[timer];
    t.expires_after(std::chrono::milliseconds(timeout));  // cancels a pending wait
    t.async_wait([this, timer](const boost::system::error_code& error) {
      if (!error) m_log.Record(timer);
    });
  }
  void Cancel(std::size_t timer) { m_timers[timer]->cancel(); }
  // Asio's epoll reactor looks at its timers only when its timerfd fires (real time) or its
  // interrupter does. On the virtual clock, the stand-in for the timerfd firing is a kick timer
  // aimed at the epoch: a new earliest timer interrupts the reactor, whose next run then finds
  // every expired timer. poll() returns right after running the reactor, so the completions
  // it queued run at a second poll (which also runs the operation_aborted completions of
  // re-arms and cancels).
  std::size_t RunDue() {
    m_kick.expires_at(BenchmarkChronoClock::time_point{});
    m_kick.async_wait([](const boost::system::error_code&) {});
    std::size_t handlers = 0;
    for (int i = 0; i < 2; ++i) {
      m_io.restart();
      handlers += m_io.poll();
    }
    return handlers;
  }
  Milliseconds NextTimeout() { return kInfinite; }  // Asio does not expose it

 private:
  boost::asio::io_context m_io{1};
  Timer m_kick{m_io};
  FiringLog& m_log;
  std::vector<std::unique_ptr<Timer>> m_timers;
};

}  // namespace timerwheel::perf
