// An ITimer that calls a function: for tests whose callbacks signal promises or call back in.
#pragma once

#include <functional>
#include <utility>

#include "TimerQueue/ITimer.h"

namespace timerwheel::test {

class FunctionTimer final : public ITimer {
 public:
  explicit FunctionTimer(std::function<void(UserData)> function)
      : m_function(std::move(function)) {}
  void OnTimer(UserData userData) override { m_function(userData); }

 private:
  std::function<void(UserData)> m_function;
};

}  // namespace timerwheel::test
