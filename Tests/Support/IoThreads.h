// An io_context run by a few threads for real-socket tests.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>
#include <thread>
#include <vector>

namespace timerwheel::test {

// Runs until Stop (or destruction), which lets the threads finish the work that is left rather
// than abandoning handlers: close every socket and endpoint first, or Stop waits for them.
class IoThreads {
 public:
  explicit IoThreads(unsigned threads) : m_guard(m_io.get_executor()) {
    for (unsigned i = 0; i < threads; ++i) m_threads.emplace_back([this] { m_io.run(); });
  }
  ~IoThreads() { Stop(); }
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  void Stop() {
    m_guard.reset();
    for (auto& thread : m_threads) {
      if (thread.joinable()) thread.join();
    }
  }
  boost::asio::io_context& Io() { return m_io; }

 private:
  boost::asio::io_context m_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> m_guard;
  std::vector<std::thread> m_threads;
};

}  // namespace timerwheel::test
