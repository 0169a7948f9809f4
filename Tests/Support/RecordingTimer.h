// An ITimer that records each firing (user data and time) and can run an action inside OnTimer.
#pragma once

#include <functional>
#include <vector>

#include "TimerQueue/ITickProvider.h"
#include "TimerQueue/ITimer.h"

namespace timerwheel::test {

class RecordingTimer final : public ITimer {
 public:
  struct Firing {
    UserData userData;
    Ticks at;
  };

  explicit RecordingTimer(const ITickProvider& ticks) : m_ticks(ticks) {}

  void OnTimer(UserData userData) override {
    m_firings.push_back({userData, m_ticks.GetTickCount()});
    if (m_action) m_action(userData);
  }

  // Runs inside OnTimer, after the firing is recorded: re-set, cancel, destroy, throw...
  void OnFire(std::function<void(UserData)> action) { m_action = std::move(action); }

  const std::vector<Firing>& Firings() const noexcept { return m_firings; }
  std::size_t Count() const noexcept { return m_firings.size(); }
  std::vector<UserData> UserDataInOrder() const {
    std::vector<UserData> result;
    for (const Firing& firing : m_firings) result.push_back(firing.userData);
    return result;
  }
  void Clear() { m_firings.clear(); }

 private:
  const ITickProvider& m_ticks;
  std::function<void(UserData)> m_action;
  std::vector<Firing> m_firings;
};

}  // namespace timerwheel::test
