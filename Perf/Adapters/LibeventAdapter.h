// libevent's evtimer (evtimer_add / evtimer_del) on an event_base. libevent reads the real
// monotonic clock, so it takes part only in workloads that need no virtual time.
#pragma once

#include <event2/event.h>

#include <stdexcept>
#include <vector>

#include "BenchmarkClock.h"

namespace timerwheel::perf {

class LibeventAdapter {
 public:
  static constexpr bool kVirtualTime = false;

  LibeventAdapter(std::size_t capacity, FiringLog& log) : m_base(event_base_new()), m_log(log) {
    if (m_base == nullptr) throw std::runtime_error("event_base_new failed");
    m_events.reserve(capacity);
    m_contexts.reserve(capacity);
  }
  ~LibeventAdapter() {
    for (event* e : m_events) event_free(e);
    event_base_free(m_base);
  }
  LibeventAdapter(const LibeventAdapter&) = delete;
  LibeventAdapter& operator=(const LibeventAdapter&) = delete;

  std::size_t Create() {
    if (m_contexts.size() == m_contexts.capacity())
      throw std::length_error("LibeventAdapter is full");
    const std::size_t index = m_events.size();
    m_contexts.push_back({this, index});
    m_events.push_back(evtimer_new(m_base, &LibeventAdapter::OnTimer, &m_contexts.back()));
    return index;
  }
  void Arm(std::size_t timer, Milliseconds timeout) {
    const timeval tv{static_cast<long>(timeout / 1000), static_cast<long>(timeout % 1000) * 1000};
    evtimer_add(m_events[timer], &tv);  // re-adding a pending timer reschedules it
  }
  void Cancel(std::size_t timer) { evtimer_del(m_events[timer]); }
  std::size_t RunDue() {
    const auto before = m_log.fired;
    event_base_loop(m_base, EVLOOP_NONBLOCK);
    return static_cast<std::size_t>(m_log.fired - before);
  }
  Milliseconds NextTimeout() { return kInfinite; }

 private:
  struct Context {
    LibeventAdapter* self;
    std::size_t index;
  };
  static void OnTimer(evutil_socket_t, short, void* arg) {
    auto* context = static_cast<Context*>(arg);
    context->self->m_log.Record(context->index);
  }

  event_base* m_base;
  FiringLog& m_log;
  std::vector<event*> m_events;
  std::vector<Context> m_contexts;  // reserved up front: addresses stay valid
};

}  // namespace timerwheel::perf
