// The timer queue contract written as plainly as possible (a vector and a sort), for the
// differential test to compare real implementations against.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "TimerQueue/ITimerQueue.h"

namespace timerwheel::test {

class ReferenceModel {
 public:
  using SetIf = ITimerQueue::SetIf;
  using UpdateIf = ITimerQueue::UpdateIf;

  struct Expiry {
    std::size_t id;
    UserData userData;
    Ticks firingTime;
  };

  explicit ReferenceModel(Milliseconds granularity) : m_granularity(granularity) {}

  Ticks FiringTime(Ticks deadline) const {
    return (deadline + m_granularity - 1) / m_granularity * m_granularity;
  }

  std::size_t Create() {
    m_timers.push_back(Timer{});
    return m_timers.size() - 1;
  }

  bool IsSet(std::size_t id) const { return m_timers[id].pending; }

  bool Set(std::size_t id, Ticks now, Milliseconds timeout, UserData userData, SetIf setIf) {
    Timer& timer = m_timers[id];
    const bool wasPending = timer.pending;
    if (!(wasPending && setIf == SetIf::NotSet)) Arm(timer, now + timeout, userData);
    return wasPending;
  }

  bool Update(std::size_t id, Ticks now, Milliseconds timeout, UserData userData, UpdateIf updateIf,
              bool& updated) {
    Timer& timer = m_timers[id];
    const bool wasPending = timer.pending;
    const Ticks deadline = now + timeout;
    updated = !wasPending || updateIf == UpdateIf::Always ||
              updateIf == UpdateIf::AlwaysNoTimeoutChange ||
              (updateIf == UpdateIf::NewTimeIsSooner && deadline < timer.deadline) ||
              (updateIf == UpdateIf::NewTimeIsLater && deadline > timer.deadline);
    if (wasPending && updateIf == UpdateIf::AlwaysNoTimeoutChange) {
      timer.userData = userData;
    } else if (updated) {
      Arm(timer, deadline, userData);
    }
    return wasPending;
  }

  bool Cancel(std::size_t id) {
    const bool wasPending = m_timers[id].pending;
    m_timers[id].pending = false;
    return wasPending;
  }

  bool Destroy(std::size_t id) { return Cancel(id); }

  void SetOneShot(Ticks now, Milliseconds timeout, UserData userData) {
    Arm(m_timers[Create()], now + timeout, userData);
  }

  Milliseconds NextTimeout(Ticks now) const {
    if (!m_batch.empty() && !m_dispatching) return 0;
    std::optional<Ticks> earliest;
    for (const Timer& timer : m_timers) {
      if (timer.pending && (!earliest || FiringTime(timer.deadline) < *earliest)) {
        earliest = FiringTime(timer.deadline);
      }
    }
    if (!earliest) return kInfinite;
    if (*earliest <= now) return 0;
    return static_cast<Milliseconds>(std::min<Ticks>(*earliest - now, kInfinite - 1));
  }

  // Detaches every due timer, ordered by firing time and then set order.
  bool Begin(Ticks now) {
    std::vector<std::size_t> due;
    for (std::size_t id = 0; id < m_timers.size(); ++id) {
      if (m_timers[id].pending && FiringTime(m_timers[id].deadline) <= now) due.push_back(id);
    }
    std::sort(due.begin(), due.end(), [&](std::size_t a, std::size_t b) {
      const Ticks fa = FiringTime(m_timers[a].deadline), fb = FiringTime(m_timers[b].deadline);
      return fa != fb ? fa < fb : m_timers[a].sequence < m_timers[b].sequence;
    });
    for (std::size_t id : due) {
      m_timers[id].pending = false;
      m_batch.push_back({id, m_timers[id].userData, FiringTime(m_timers[id].deadline)});
    }
    m_dispatching = !m_batch.empty();
    return m_dispatching;
  }

  std::optional<Expiry> NextToFire() {
    if (m_position == m_batch.size()) return std::nullopt;
    ++m_fired;
    return m_batch[m_position++];
  }

  void End() {
    m_batch.erase(m_batch.begin(), m_batch.begin() + static_cast<std::ptrdiff_t>(m_position));
    m_position = 0;
    m_dispatching = false;
  }

  std::size_t Undispatched() const { return m_batch.size() - m_position; }
  std::uint64_t Fired() const { return m_fired; }

 private:
  struct Timer {
    bool pending = false;
    Ticks deadline = 0;
    UserData userData = 0;
    std::uint64_t sequence = 0;
  };

  void Arm(Timer& timer, Ticks deadline, UserData userData) {
    timer.pending = true;
    timer.deadline = deadline;
    timer.userData = userData;
    timer.sequence = m_nextSequence++;
  }

  Milliseconds m_granularity;
  std::vector<Timer> m_timers;
  std::vector<Expiry> m_batch;
  std::size_t m_position = 0;
  bool m_dispatching = false;
  std::uint64_t m_nextSequence = 0;
  std::uint64_t m_fired = 0;
};

}  // namespace timerwheel::test
