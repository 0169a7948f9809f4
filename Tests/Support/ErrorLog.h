// A driver's error handler for tests: keeps what each reported exception said.
#pragma once

#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "Support/WaitableCount.h"

namespace timerwheel::test {

// The drivers' error handler: what each reported exception said.
class ErrorLog {
 public:
  void operator()(std::exception_ptr error) {
    std::string text;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      text = e.what();
    } catch (int value) {
      text = "int " + std::to_string(value);
    } catch (...) {
      text = "unknown exception";
    }
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_messages.push_back(std::move(text));
    }
    m_count.Add();
  }
  std::vector<std::string> Messages() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_messages;
  }
  bool WaitFor(std::size_t atLeast) { return m_count.WaitFor(atLeast); }

 private:
  std::mutex m_mutex;
  std::vector<std::string> m_messages;
  WaitableCount m_count;
};

}  // namespace timerwheel::test
