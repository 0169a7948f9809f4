// A count that other threads raise and a test waits on, with a generous timeout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <future>
#include <mutex>

namespace timerwheel::test {

// Long enough for any wait on a loaded machine or under a sanitizer; a wait that times out is a
// failure, never a way to pass.
inline constexpr std::chrono::seconds kGenerousWait{20};

// Whether `future` became ready within kGenerousWait.
template <class Future>
bool Ready(Future& future) {
  return future.wait_for(kGenerousWait) == std::future_status::ready;
}

// A count that other threads raise and the test waits on.
class WaitableCount {
 public:
  void Add(std::size_t n = 1) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_count += n;
    m_changed.notify_all();  // under the lock: the waiter may destroy this object once woken
  }
  bool WaitFor(std::size_t atLeast, std::chrono::milliseconds timeout = kGenerousWait) {
    std::unique_lock<std::mutex> lock(m_mutex);
    return m_changed.wait_for(lock, timeout, [&] { return m_count >= atLeast; });
  }
  std::size_t Get() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_count;
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::size_t m_count = 0;
};

}  // namespace timerwheel::test
