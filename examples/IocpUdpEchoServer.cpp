// A Windows UDP server to start from: a ReliableUDP echo server whose io_context is run by N
// worker threads (Boost.Asio's own I/O completion port underneath), plus application timers on
// the server's own completion port through IocpTimerQueue, and a clean shutdown on Ctrl+C or when
// a client sends "quit".
//
//   IocpUdpEchoServer [--port P] [--threads N]   serve until Ctrl+C or a "quit" message
//   IocpUdpEchoServer --self-test                 serve on a free loopback port, run a client
//                                                  that exchanges messages and sends "quit";
//                                                  exit 0 if every echo matched
//
// Two ports, because Asio's port is Asio's: its workers would take a foreign packet for one of
// Asio's operations. The server's own port carries what the application posts (here the timer
// packets and the quit keys) and is served by its own workers, the way an IOCP server does.
//
// Shutdown, in the order that never waits on anything that has stopped:
//   1. Endpoint::Close: every connection ends, no handler starts new work;
//   2. timers.BeginShutdown + WaitForShutdownToComplete while the application workers still
//      serve the port (no timer callback runs after it returns);
//   3. post one quit key per application worker and join them;
//   4. destroy the IocpTimerQueue, then close the port;
//   5. let the io_context run out and join its threads.
#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Error.h"
#include "TimerQueue/IocpTimerQueue.h"
#include "TimerWheel/TimerWheel.h"

// After Boost.Asio, which includes <winsock2.h> before <windows.h> (the other order needs
// WIN32_LEAN_AND_MEAN, which this project's build defines but yours may not).
#include <windows.h>

namespace {

using Udp = boost::asio::ip::udp;
using timerwheel::rudp::Connection;
using timerwheel::rudp::Endpoint;
using timerwheel::rudp::EndpointOptions;

constexpr ULONG_PTR kQuitKey = 1;                          // the server's own completion key
constexpr timerwheel::Milliseconds kIdleTimeout = 30'000;  // application-level idle close
constexpr timerwheel::Milliseconds kStatsPeriod = 10'000;

// Set by Ctrl+C (on the console's handler thread) or by a "quit" message (on an io thread).
HANDLE g_stopRequested = nullptr;

BOOL WINAPI OnConsoleControl(DWORD event) {
  if (event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT && event != CTRL_CLOSE_EVENT) {
    return FALSE;
  }
  ::SetEvent(g_stopRequested);
  return TRUE;
}

// The server's own completion port and its workers: timer callbacks run here.
class ApplicationPort {
 public:
  explicit ApplicationPort(unsigned workers)
      : m_port(::CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0)) {
    if (m_port == nullptr) {
      throw std::runtime_error("CreateIoCompletionPort failed: " +
                               std::to_string(::GetLastError()));
    }
    for (unsigned i = 0; i < workers; ++i) m_workers.emplace_back([this] { Work(); });
  }
  ~ApplicationPort() {
    StopWorkers();
    ::CloseHandle(m_port);
  }
  HANDLE Handle() const { return m_port; }

  void StopWorkers() {
    for (std::size_t i = 0; i < m_workers.size(); ++i) {
      ::PostQueuedCompletionStatus(m_port, 0, kQuitKey, nullptr);
    }
    for (std::thread& worker : m_workers) worker.join();
    m_workers.clear();
  }

 private:
  void Work() {
    for (;;) {
      DWORD bytes = 0;
      ULONG_PTR key = 0;
      OVERLAPPED* overlapped = nullptr;
      const BOOL ok = ::GetQueuedCompletionStatus(m_port, &bytes, &key, &overlapped, INFINITE);
      if (!ok && overlapped == nullptr) return;  // the port is gone
      if (timerwheel::IocpTimerQueue::HandleCompletion(key, overlapped)) continue;
      if (key == kQuitKey) return;
      // ... the application's own completions ...
    }
  }

  HANDLE m_port;
  std::vector<std::thread> m_workers;
};

class EchoServer final : public timerwheel::ITimer {
 public:
  EchoServer(unsigned short port, unsigned ioThreads, unsigned applicationWorkers)
      : m_endpoint(m_io, Udp::endpoint(Udp::v4(), port), ServerOptions()),
        m_applicationPort(applicationWorkers),
        m_timers(m_applicationPort.Handle(), m_wheel) {
    m_statsTimer = m_timers.CreateTimer();
    m_timers.SetTimer(m_statsTimer, *this, kStatsPeriod, kStatsTimer);
    Accept();
    for (unsigned i = 0; i < ioThreads; ++i) m_ioThreads.emplace_back([this] { m_io.run(); });
  }

  ~EchoServer() { Stop(); }

  unsigned short Port() const { return m_endpoint.LocalEndpoint().port(); }
  std::uint64_t Echoed() const { return m_echoed; }

  void Stop() {
    if (m_stopped.exchange(true)) return;
    m_endpoint.Close();        // 1. every connection ends; accept and receive handlers see errors
    m_timers.BeginShutdown();  // 2. while the application workers still serve the port
    if (!m_timers.WaitForShutdownToComplete(std::chrono::seconds(10))) {
      std::fprintf(stderr, "a timer callback is still running after 10 s\n");
    }
    m_applicationPort.StopWorkers();  // 3.
    // 4. the IocpTimerQueue and the port go with this object, in that order (members).
    m_work.reset();  // 5.
    for (std::thread& thread : m_ioThreads) thread.join();
  }

 private:
  static constexpr timerwheel::UserData kStatsTimer = 0;  // sessions are numbered from 1

  struct Session {
    std::shared_ptr<Connection> connection;
    std::vector<std::uint8_t> message;
    timerwheel::TimerHandle idleTimer;
  };

  static EndpointOptions ServerOptions() {
    EndpointOptions options;
    options.acceptIncoming = true;
    return options;
  }

  void Accept() {
    m_endpoint.AsyncAccept(
        [this](boost::system::error_code error, std::shared_ptr<Connection> connection) {
          if (error) return;  // EndpointClosed: shutting down
          auto session = std::make_shared<Session>();
          session->connection = std::move(connection);
          session->idleTimer = m_timers.CreateTimer();
          timerwheel::UserData id;
          {
            std::lock_guard<std::mutex> lock(m_sessionsMutex);
            id = m_nextSession++;
            m_sessions.emplace(id, session);
          }
          m_timers.SetTimer(session->idleTimer, *this, kIdleTimeout, id);
          Receive(id, session);
          Accept();
        });
  }

  void Receive(timerwheel::UserData id, const std::shared_ptr<Session>& session) {
    session->connection->AsyncReceive(session->message, [this, id, session](auto error) {
      if (error) return End(id, session);  // closed by the peer, idle, or shutting down
      static constexpr char kQuit[] = "quit";
      if (session->message.size() == sizeof kQuit - 1 &&
          std::memcmp(session->message.data(), kQuit, sizeof kQuit - 1) == 0) {
        ::SetEvent(g_stopRequested);
        return;
      }
      m_timers.SetTimer(session->idleTimer, *this, kIdleTimeout, id);  // re-armed: O(1)
      session->connection->AsyncSend(boost::asio::buffer(session->message),
                                     [this, id, session](auto sendError) {
                                       if (sendError) return End(id, session);
                                       ++m_echoed;
                                       Receive(id, session);
                                     });
    });
  }

  void End(timerwheel::UserData id, const std::shared_ptr<Session>& session) {
    {
      std::lock_guard<std::mutex> lock(m_sessionsMutex);
      if (m_sessions.erase(id) == 0) return;
    }
    m_timers.DestroyTimer(session->idleTimer);  // a callback already dispatched finds no session
  }

  // Application timers, on a worker of the server's own port.
  void OnTimer(timerwheel::UserData id) override {
    if (id == kStatsTimer) {
      std::lock_guard<std::mutex> lock(m_sessionsMutex);
      std::printf("%zu connections, %llu messages echoed\n", m_sessions.size(),
                  static_cast<unsigned long long>(m_echoed.load()));
      m_timers.SetTimer(m_statsTimer, *this, kStatsPeriod, kStatsTimer);
      return;
    }
    std::shared_ptr<Session> session;
    {
      std::lock_guard<std::mutex> lock(m_sessionsMutex);
      const auto found = m_sessions.find(id);
      if (found == m_sessions.end()) return;
      session = found->second;
    }
    session->connection->Close();  // idle: its receive then fails and End runs
  }

  // Members in construction order; destruction runs backwards: the timers before the port, the
  // port (its workers) before the wheel, the endpoint before the io_context.
  boost::asio::io_context m_io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> m_work{
      m_io.get_executor()};
  Endpoint m_endpoint;
  timerwheel::TimerWheel m_wheel;
  ApplicationPort m_applicationPort;
  timerwheel::IocpTimerQueue m_timers;
  timerwheel::TimerHandle m_statsTimer;
  std::mutex m_sessionsMutex;
  std::map<timerwheel::UserData, std::shared_ptr<Session>> m_sessions;
  timerwheel::UserData m_nextSession = 1;
  std::atomic<std::uint64_t> m_echoed{0};
  std::atomic<bool> m_stopped{false};
  std::vector<std::thread> m_ioThreads;
};

// The self-test's client: connects, sends each message and checks its echo, then sends "quit".
bool RunClient(unsigned short serverPort, int messages) {
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread thread([&io] { io.run(); });
  bool ok = true;
  {
    Endpoint endpoint(io, Udp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
    std::promise<std::shared_ptr<Connection>> connected;
    endpoint.AsyncConnect(Udp::endpoint(boost::asio::ip::address_v4::loopback(), serverPort),
                          [&](boost::system::error_code error, std::shared_ptr<Connection> c) {
                            if (error)
                              std::fprintf(stderr, "connect: %s\n", error.message().c_str());
                            connected.set_value(std::move(c));
                          });
    const std::shared_ptr<Connection> connection = connected.get_future().get();
    ok = connection != nullptr;
    std::vector<std::uint8_t> echo;
    for (int i = 0; ok && i < messages; ++i) {
      const std::string text = "message " + std::to_string(i) + std::string(i * 37 % 3000, 'x');
      std::promise<boost::system::error_code> sent, received;
      connection->AsyncSend(boost::asio::buffer(text),
                            [&](boost::system::error_code error) { sent.set_value(error); });
      connection->AsyncReceive(echo,
                               [&](boost::system::error_code error) { received.set_value(error); });
      const auto sendError = sent.get_future().get();
      const auto receiveError = received.get_future().get();
      ok = !sendError && !receiveError && std::string(echo.begin(), echo.end()) == text;
      if (!ok) std::fprintf(stderr, "message %d: no matching echo\n", i);
    }
    if (connection) {
      std::promise<boost::system::error_code> sent;
      const std::string quit = "quit";
      connection->AsyncSend(boost::asio::buffer(quit),
                            [&](boost::system::error_code error) { sent.set_value(error); });
      ok = !sent.get_future().get() && ok;
      // The server stops on "quit" and its endpoint ends the connection; give up after 10 s.
      std::promise<void> closed;
      connection->AsyncWaitClosed([&](boost::system::error_code) { closed.set_value(); });
      auto closedFuture = closed.get_future();
      if (closedFuture.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        connection->Abort();
        closedFuture.wait();
      }
    }
  }
  work.reset();
  thread.join();
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short port = 7000;
  unsigned threads = (std::max)(2u, std::thread::hardware_concurrency());
  bool selfTest = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--self-test") {
      selfTest = true;
      port = 0;
    } else if (arg == "--port" && i + 1 < argc) {
      port = static_cast<unsigned short>(std::stoul(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = static_cast<unsigned>((std::max)(1ul, std::stoul(argv[++i])));
    } else {
      std::fprintf(stderr, "usage: %s [--port P] [--threads N] | --self-test\n", argv[0]);
      return 2;
    }
  }
  g_stopRequested = ::CreateEventW(nullptr, TRUE, FALSE, nullptr);  // manual reset
  if (g_stopRequested == nullptr) return std::fprintf(stderr, "CreateEvent failed\n"), 1;
  ::SetConsoleCtrlHandler(OnConsoleControl, TRUE);

  int status = 0;
  try {
    EchoServer server(port, threads, 2);
    std::printf("echo server on UDP port %u, %u io threads; Ctrl+C or \"quit\" stops it\n",
                static_cast<unsigned>(server.Port()), threads);
    std::fflush(stdout);
    std::future<bool> client;
    if (selfTest) client = std::async(std::launch::async, RunClient, server.Port(), 50);
    const DWORD waited = ::WaitForSingleObject(g_stopRequested, selfTest ? 30'000 : INFINITE);
    server.Stop();
    std::printf("stopped: %llu messages echoed\n",
                static_cast<unsigned long long>(server.Echoed()));
    if (selfTest) {
      const bool clientOk = client.get();
      status = waited == WAIT_OBJECT_0 && clientOk && server.Echoed() == 50 ? 0 : 1;
      if (status != 0) std::fprintf(stderr, "self-test FAILED\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    status = 1;
  }
  ::SetConsoleCtrlHandler(OnConsoleControl, FALSE);
  ::CloseHandle(g_stopRequested);
  return status;
}
