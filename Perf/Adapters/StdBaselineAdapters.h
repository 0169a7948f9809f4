// What a C++ programmer writes without a timer library: a std::priority_queue with lazy
// deletion (re-arm and cancel leave stale entries behind, skipped when they reach the top), and a
// std::multimap keyed by deadline with each timer's iterator kept for erase.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <queue>
#include <vector>

#include "BenchmarkClock.h"

namespace timerwheel::perf {

class LazyPriorityQueueAdapter {
 public:
  static constexpr bool kVirtualTime = true;

  LazyPriorityQueueAdapter(std::size_t capacity, FiringLog& log) : m_log(log) {
    m_generation.reserve(capacity);
  }

  std::size_t Create() {
    m_generation.push_back(kUnarmed);
    return m_generation.size() - 1;
  }
  void Arm(std::size_t timer, Milliseconds timeout) {
    if (m_generation[timer] % 2 == 0) ++m_armed;
    m_generation[timer] = NextArmedGeneration(m_generation[timer]);
    m_heap.push({BenchmarkClock::Now() + timeout, m_sequence++, timer, m_generation[timer]});
    if (m_heap.size() > 2 * m_armed + 1024) Compact();  // bound the stale entries
  }
  void Cancel(std::size_t timer) {
    if (m_generation[timer] % 2 == 1) {
      ++m_generation[timer];  // even: not armed; every entry for it is now stale
      --m_armed;
    }
  }
  std::size_t RunDue() {
    std::size_t fired = 0;
    while (!m_heap.empty() && m_heap.top().deadline <= BenchmarkClock::Now()) {
      const Entry entry = m_heap.top();
      m_heap.pop();
      if (m_generation[entry.timer] != entry.generation) continue;  // stale
      ++m_generation[entry.timer];
      --m_armed;
      m_log.Record(entry.timer);
      ++fired;
    }
    return fired;
  }
  Milliseconds NextTimeout() {
    while (!m_heap.empty() && m_generation[m_heap.top().timer] != m_heap.top().generation)
      m_heap.pop();
    if (m_heap.empty()) return kInfinite;
    const Ticks deadline = m_heap.top().deadline;
    return deadline <= BenchmarkClock::Now()
               ? 0
               : static_cast<Milliseconds>(deadline - BenchmarkClock::Now());
  }

 private:
  static constexpr std::uint64_t kUnarmed = 0;  // even generations: not armed; odd: armed
  static std::uint64_t NextArmedGeneration(std::uint64_t generation) {
    return generation % 2 == 0 ? generation + 1 : generation + 2;
  }
  struct Entry {
    Ticks deadline;
    std::uint64_t sequence;
    std::size_t timer;
    std::uint64_t generation;
    bool operator>(const Entry& other) const {
      return deadline != other.deadline ? deadline > other.deadline : sequence > other.sequence;
    }
  };
  void Compact() {
    std::vector<Entry> live;
    live.reserve(m_armed);
    while (!m_heap.empty()) {
      if (m_generation[m_heap.top().timer] == m_heap.top().generation) live.push_back(m_heap.top());
      m_heap.pop();
    }
    m_heap = decltype(m_heap)(std::greater<Entry>(), std::move(live));
  }

  FiringLog& m_log;
  std::vector<std::uint64_t> m_generation;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> m_heap;
  std::size_t m_armed = 0;
  std::uint64_t m_sequence = 0;
};

class MultimapAdapter {
 public:
  static constexpr bool kVirtualTime = true;

  MultimapAdapter(std::size_t capacity, FiringLog& log) : m_log(log) {
    m_positions.reserve(capacity);
  }

  std::size_t Create() {
    m_positions.push_back(m_timers.end());
    return m_positions.size() - 1;
  }
  void Arm(std::size_t timer, Milliseconds timeout) {
    Cancel(timer);
    // Equal keys go after existing ones: set order among equal deadlines.
    m_positions[timer] = m_timers.emplace(BenchmarkClock::Now() + timeout, timer);
  }
  void Cancel(std::size_t timer) {
    if (m_positions[timer] != m_timers.end()) {
      m_timers.erase(m_positions[timer]);
      m_positions[timer] = m_timers.end();
    }
  }
  std::size_t RunDue() {
    std::size_t fired = 0;
    while (!m_timers.empty() && m_timers.begin()->first <= BenchmarkClock::Now()) {
      const std::size_t timer = m_timers.begin()->second;
      m_timers.erase(m_timers.begin());
      m_positions[timer] = m_timers.end();
      m_log.Record(timer);
      ++fired;
    }
    return fired;
  }
  Milliseconds NextTimeout() {
    if (m_timers.empty()) return kInfinite;
    const Ticks deadline = m_timers.begin()->first;
    return deadline <= BenchmarkClock::Now()
               ? 0
               : static_cast<Milliseconds>(deadline - BenchmarkClock::Now());
  }

 private:
  FiringLog& m_log;
  std::multimap<Ticks, std::size_t> m_timers;
  std::vector<std::multimap<Ticks, std::size_t>::iterator> m_positions;
};

}  // namespace timerwheel::perf
