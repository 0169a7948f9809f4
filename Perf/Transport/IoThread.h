// An io_context run by one thread, for the transport adapters.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>

namespace timerwheel::perf {

// The work guard keeps run() going while nothing is pending; Finish drops it, so run() returns
// once the handlers still queued have run (close the sockets and endpoints first: nothing is
// abandoned), and joins.
class IoThread {
 public:
  IoThread() : m_work(boost::asio::make_work_guard(m_io)), m_thread([this] { m_io.run(); }) {}
  ~IoThread() { Finish(); }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  boost::asio::io_context& Io() { return m_io; }
  void Finish() {
    m_work.reset();
    if (m_thread.joinable()) m_thread.join();
  }

 private:
  boost::asio::io_context m_io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> m_work;
  std::thread m_thread;
};

}  // namespace timerwheel::perf
