#include "TransportBenchmark/ManyConnectionsWorkload.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"

// Under `valgrind --tool=callgrind --instr-atstart=no`, the server's instructions are counted
// over the measurement window alone (instrumentation on at its start, off at its end, so the
// profile written at exit is the window's); elsewhere these are no-ops.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TIMERWHEEL_CALLGRIND_WINDOW_START() CALLGRIND_START_INSTRUMENTATION
#define TIMERWHEEL_CALLGRIND_WINDOW_END() CALLGRIND_STOP_INSTRUMENTATION
#else
#define TIMERWHEEL_CALLGRIND_WINDOW_START()
#define TIMERWHEEL_CALLGRIND_WINDOW_END()
#endif

namespace timerwheel::perf {

using Udp = boost::asio::ip::udp;

namespace {
// Set by the SIGTERM that ends the clients' process when the server's window is over: the
// clients then print their side of any lost connection before they exit.
volatile std::sig_atomic_t g_windowOver = 0;
extern "C" void OnWindowOver(int) { g_windowOver = 1; }
}  // namespace

// Sends 64-byte messages, each stamped with the time it is sent, on a set of connections whose
// endpoints one io_context runs, at `rate` a second per connection: every millisecond, from that
// io_context's thread, the messages that are due. Runs only on that thread.
class EvenSender {
 public:
  EvenSender(boost::asio::io_context& io,
             std::vector<std::shared_ptr<rudp::Connection>> connections, double rate)
      : m_timer(io),
        m_connections(std::move(connections)),
        m_perSecond(rate * static_cast<double>(m_connections.size())) {}

  void Start(Clock::time_point start) {
    m_start = start;
    Tick();
  }
  void Stop() {
    m_stopped = true;
    m_timer.cancel();
  }

 private:
  void Tick() {
    if (m_stopped || m_connections.empty()) return;
    const auto now = Clock::now();
    const auto due = static_cast<std::uint64_t>(
        std::chrono::duration<double>(now - m_start).count() * m_perSecond);
    for (; m_sent < due; ++m_sent) {
      // The buffer lives until the handler: the message is copied into the send buffer by then.
      // Stamped as it is sent, not at the tick: the latency is the message's, not the batch's.
      auto buffer = std::make_shared<std::array<std::uint8_t, 64>>();
      const std::uint64_t stamp = NowMicroseconds();
      std::memcpy(buffer->data(), &stamp, 8);
      m_connections[m_sent % m_connections.size()]->AsyncSend(
          boost::asio::buffer(*buffer), [buffer](boost::system::error_code) {});
    }
    m_timer.expires_at(now + std::chrono::milliseconds(1));
    m_timer.async_wait([this](boost::system::error_code ec) {
      if (!ec) Tick();
    });
  }

  boost::asio::steady_timer m_timer;
  std::vector<std::shared_ptr<rudp::Connection>> m_connections;
  double m_perSecond;
  Clock::time_point m_start{};
  std::uint64_t m_sent = 0;
  bool m_stopped = false;
};

int RunClients(std::uint16_t port, std::size_t count, double rate, double seconds,
               const rudp::EndpointOptions& liveness) {
  // The clients stand for separate hosts: one socket per kConnectionsPerSocket connections
  // (a single socket's receive buffer overflows under 100k keepalive answers, which no real
  // deployment of 100k clients would see), on two io threads.
  constexpr std::size_t kConnectionsPerSocket = 5000;
  constexpr std::size_t kThreads = 2;
  std::vector<boost::asio::io_context> ios(kThreads);
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  for (auto& io : ios) {
    work.push_back(boost::asio::make_work_guard(io));
    threads.emplace_back([&io] { io.run(); });
  }
  int exitCode = 0;
  std::signal(SIGTERM, OnWindowOver);
  {
    const std::size_t sockets = (count + kConnectionsPerSocket - 1) / kConnectionsPerSocket;
    std::vector<std::unique_ptr<rudp::Endpoint>> endpoints;
    for (std::size_t i = 0; i < std::max<std::size_t>(sockets, 1); ++i) {
      rudp::EndpointOptions options;
      options.maxConnections = kConnectionsPerSocket + 10;
      options.keepaliveInterval = liveness.keepaliveInterval;
      options.idleTimeout = liveness.idleTimeout;
      endpoints.push_back(std::make_unique<rudp::Endpoint>(
          ios[i % kThreads], Udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), 0),
          options));
    }
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::shared_ptr<rudp::Connection>> connections;
    // The same, by the io thread that runs each one's endpoint: that thread sends its messages.
    std::vector<std::vector<std::shared_ptr<rudp::Connection>>> byThread(kThreads);
    std::size_t failed = 0;
    std::string firstFailure;
    const Udp::endpoint server(boost::asio::ip::make_address_v4("127.0.0.1"), port);
    // At most kOutstanding handshakes at a time (a sliding window, not batches: a batch waits for
    // its slowest handshake, and one lost datagram costs a 333 ms initial PTO, which held a 1M
    // run to 1,600 handshakes a second), so that the server's accept backlog and the sockets'
    // buffers are never the bottleneck.
    constexpr std::size_t kOutstanding = 2000;
    for (std::size_t i = 0; i < count; ++i) {
      if (i >= kOutstanding) {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait_for(lock, std::chrono::seconds(30),
                         [&] { return connections.size() + failed + kOutstanding > i; });
      }
      const std::size_t thread = (i % endpoints.size()) % kThreads;
      endpoints[i % endpoints.size()]->AsyncConnect(
          server, [&, thread](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
            std::lock_guard<std::mutex> lock(mutex);
            if (ec) {
              if (failed++ == 0) firstFailure = ec.message();
            } else {
              byThread[thread].push_back(c);
              connections.push_back(std::move(c));
            }
            changed.notify_all();
          });
    }
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait_for(lock, std::chrono::seconds(60),
                       [&] { return connections.size() + failed == count; });
      if (failed > 0) {
        std::fprintf(stderr, "clients: %zu connections failed (the first: %s)\n", failed,
                     firstFailure.c_str());
      }
    }
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    if (rate > 0) {
      // Each io thread sends its own connections' messages, every millisecond those that are
      // due, round-robin so that each connection sends `rate` a second, evenly spread. One
      // thread that slept before each message and called into the endpoints from outside their
      // io threads cost the clients 61-88 % of a core for 50k messages a second (a wake-up of an
      // io thread per message), which is what held the active rows below 100k a second.
      std::vector<std::unique_ptr<EvenSender>> senders;
      for (std::size_t t = 0; t < kThreads; ++t) {
        senders.push_back(std::make_unique<EvenSender>(ios[t], std::move(byThread[t]), rate));
        boost::asio::post(ios[t], [sender = senders.back().get(), start] { sender->Start(start); });
      }
      while (Clock::now() < end && g_windowOver == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      for (std::size_t t = 0; t < kThreads; ++t) {
        std::promise<void> stopped;
        boost::asio::post(ios[t], [&stopped, sender = senders[t].get()] {
          sender->Stop();
          stopped.set_value();
        });
        stopped.get_future().wait();
      }
    } else {
      while (Clock::now() < end && g_windowOver == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    // The clients' side of any connection lost: which end gave up, and on what.
    std::uint64_t open = 0, resetsReceived = 0, resetsSent = 0, unknown = 0;
    for (const auto& endpoint : endpoints) {
      const auto statistics = endpoint->GetStatistics();
      open += statistics.connectionsOpen;
      resetsReceived += statistics.statelessResetsReceived;
      resetsSent += statistics.statelessResetsSent;
      unknown += statistics.droppedUnknownConnection;
    }
    std::uint64_t probeTimeouts = 0, deadlinesFired = 0;
    for (const auto& connection : connections) {
      const auto statistics = connection->GetStatistics();
      probeTimeouts += statistics.probeTimeouts;
      deadlinesFired +=
          statistics.timerFired[static_cast<unsigned>(rudp::TimerKind::ConnectionDeadline)];
    }
    std::fprintf(
        stderr,
        "clients: %llu of %zu connections open at the end; since connecting: PTOs %llu, "
        "connection deadlines fired %llu, stateless resets received %llu and sent %llu, datagrams "
        "for unknown connections %llu\n",
        static_cast<unsigned long long>(open), connections.size(),
        static_cast<unsigned long long>(probeTimeouts),
        static_cast<unsigned long long>(deadlinesFired),
        static_cast<unsigned long long>(resetsReceived),
        static_cast<unsigned long long>(resetsSent), static_cast<unsigned long long>(unknown));
    // Ended by the server (its window is over): what it measured is done, and closing a
    // million connections here would only hold it up.
    if (g_windowOver != 0) std::_Exit(0);
    connections.clear();
    for (auto& endpoint : endpoints) endpoint->Close();
  }
  work.clear();
  for (auto& thread : threads) thread.join();
  return exitCode;
}

namespace {

// The server's own figures over the measurement window: which timers fired, and why.
struct ServerWindowTotals {
  std::uint64_t fired[rudp::kTimerKindCount] = {};
  std::uint64_t probeTimeouts = 0;
  std::uint64_t packetsLost = 0;
  rudp::EndpointStatistics endpoint;
  void Add(const rudp::ConnectionStatistics& statistics) {
    for (unsigned kind = 0; kind < rudp::kTimerKindCount; ++kind) {
      fired[kind] += statistics.timerFired[kind];
    }
    probeTimeouts += statistics.probeTimeouts;
    packetsLost += statistics.packetsLost;
  }
  void PrintSince(const ServerWindowTotals& before, const std::string& queue,
                  std::size_t count) const {
    const auto delta = [](std::uint64_t after, std::uint64_t earlier) {
      return static_cast<unsigned long long>(after - std::min(after, earlier));
    };
    std::fprintf(stderr,
                 "many: %s %zu: server timers fired in the window (loss detection, delayed ACK, "
                 "pacing, keepalive, idle): %llu %llu %llu %llu %llu; PTOs %llu, packets lost "
                 "%llu, datagrams in %llu out %llu, dropped by the full socket %llu, send "
                 "would-block %llu, system calls: receive %llu send %llu\n",
                 queue.c_str(), count, delta(fired[0], before.fired[0]),
                 delta(fired[1], before.fired[1]), delta(fired[2], before.fired[2]),
                 delta(fired[3], before.fired[3]), delta(fired[4], before.fired[4]),
                 delta(probeTimeouts, before.probeTimeouts), delta(packetsLost, before.packetsLost),
                 delta(endpoint.datagramsReceived, before.endpoint.datagramsReceived),
                 delta(endpoint.datagramsSent, before.endpoint.datagramsSent),
                 delta(endpoint.droppedSocketBufferFull, before.endpoint.droppedSocketBufferFull),
                 delta(endpoint.sendWouldBlock, before.endpoint.sendWouldBlock),
                 delta(endpoint.receiveSystemCalls, before.endpoint.receiveSystemCalls),
                 delta(endpoint.sendSystemCalls, before.endpoint.sendSystemCalls));
  }
};

pid_t SpawnClients(std::uint16_t port, std::size_t count, double rate, double seconds,
                   const rudp::EndpointOptions& liveness) {
  const std::string portText = std::to_string(port), countText = std::to_string(count),
                    rateText = std::to_string(rate), secondsText = std::to_string(seconds),
                    keepaliveText = std::to_string(liveness.keepaliveInterval),
                    idleText = std::to_string(liveness.idleTimeout);
  // The executable's own path, read before the fork: under valgrind, exec'ing /proc/self/exe
  // would start valgrind's tool (readlink is answered with the benchmark's path).
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) std::strcpy(self, "/proc/self/exe");
  const pid_t pid = fork();
  if (pid == 0) {
    execl(self, "TransportBenchmark", "--clients", portText.c_str(), countText.c_str(),
          rateText.c_str(), secondsText.c_str(), keepaliveText.c_str(), idleText.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

}  // namespace

ManyRow RunMany(rudp::TimerQueueKind queueKind, std::size_t count, double rate, double window,
                const rudp::EndpointOptions& server, unsigned serverThreads) {
  ManyRow row;
  row.queue = queueKind == rudp::TimerQueueKind::Wheel ? "wheel" : "heap";
  row.connections = count;
  row.rate = rate;
  row.serverThreads = serverThreads;
  CountingTimerQueueMonitor monitor;
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < serverThreads; ++i) threads.emplace_back([&] { io.run(); });
  {
    rudp::EndpointOptions options = server;
    options.shards = serverThreads;
    options.acceptIncoming = true;
    options.timerQueue = queueKind;
    options.timerMonitor = &monitor;
    options.maxConnections = count + 10;
    options.acceptBacklog = count + 10;
    // Every client connection comes from one loopback address, at once: no admission limits.
    options.maxConnectionsPerAddress = 0;
    options.maxConnectionsPerPrefix = 0;
    options.newConnectionsPerSecond = 0;
    // Measured once the endpoint (and its timer wheel's slot ring) exists: what follows is
    // per connection.
    rudp::Endpoint server(io, Udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), 0),
                          options);
    const std::size_t rssBefore = ResidentBytes();
    const std::size_t heapBefore = mallinfo2().uordblks;
    std::mutex mutex;
    std::vector<double> latencies;
    latencies.reserve(static_cast<std::size_t>(rate * static_cast<double>(count) * window * 2));
    std::atomic<std::uint64_t> received{0};
    std::vector<std::shared_ptr<rudp::Connection>> accepted;
    struct Reader : std::enable_shared_from_this<Reader> {
      std::shared_ptr<rudp::Connection> connection;
      std::vector<std::uint8_t> buffer;
      std::function<void(const std::vector<std::uint8_t>&)> onMessage;
      void Next() {
        auto self = shared_from_this();
        connection->AsyncReceive(buffer, [self](boost::system::error_code ec) {
          if (ec) return;
          self->onMessage(self->buffer);
          self->Next();
        });
      }
    };
    std::function<void()> accept = [&] {
      server.AsyncAccept([&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
        if (ec) return;
        auto reader = std::make_shared<Reader>();
        reader->connection = c;
        reader->onMessage = [&](const std::vector<std::uint8_t>& message) {
          if (message.size() < 8) return;
          std::uint64_t stamp = 0;
          std::memcpy(&stamp, message.data(), 8);
          const double ms = static_cast<double>(NowMicroseconds() - stamp) / 1000.0;
          ++received;
          std::lock_guard<std::mutex> lock(mutex);
          latencies.push_back(ms);
        };
        reader->Next();
        {
          std::lock_guard<std::mutex> lock(mutex);
          accepted.push_back(std::move(c));
        }
        accept();
      });
    };
    accept();
    const double settle = 3.0;
    const pid_t child =
        SpawnClients(server.LocalEndpoint().port(), count, rate,
                     window + settle + 30.0 + static_cast<double>(count) / 2000.0, options);
    const auto connectStart = Clock::now();
    const auto connectDeadline = connectStart + std::chrono::seconds(120);
    while (server.GetStatistics().connectionsOpen < count && Clock::now() < connectDeadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling a counter
    }
    {
      const rudp::EndpointStatistics connected = server.GetStatistics();
      std::fprintf(stderr,
                   "many: %s %zu: %llu connected in %.1f s; server socket: %.1f MiB receive "
                   "buffer, %llu datagrams dropped by it full\n",
                   row.queue.c_str(), count,
                   static_cast<unsigned long long>(connected.connectionsOpen),
                   std::chrono::duration<double>(Clock::now() - connectStart).count(),
                   static_cast<double>(connected.socketReceiveBufferBytes) / (1 << 20),
                   static_cast<unsigned long long>(connected.droppedSocketBufferFull));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(settle));
    {
      std::lock_guard<std::mutex> lock(mutex);
      latencies.clear();
    }
    // What the server's connections did in the window, to explain the timers/s column.
    const auto serverTotals = [&] {
      ServerWindowTotals totals;
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& connection : accepted) totals.Add(connection->GetStatistics());
      totals.endpoint = server.GetStatistics();
      return totals;
    };
    const ServerWindowTotals totalsBefore = serverTotals();
    const std::uint64_t receivedBefore = received;
    const auto firedBefore = monitor.Fired();
    const auto setBefore = monitor.Set();
    const auto cancelledBefore = monitor.CancelCalls();
    const std::uint64_t waitBefore = server.GetStatistics().lockWaitMicroseconds;
    const double cpuBefore = ProcessCpuSeconds();
    TIMERWHEEL_CALLGRIND_WINDOW_START();
    std::this_thread::sleep_for(std::chrono::duration<double>(window));
    TIMERWHEEL_CALLGRIND_WINDOW_END();
    const double cpu = ProcessCpuSeconds() - cpuBefore;
    const double waited =
        static_cast<double>(server.GetStatistics().lockWaitMicroseconds - waitBefore) / 1e6;
    row.lockWaitPercent = cpu > 0 ? 100.0 * waited / cpu : 0;
    const auto fired = monitor.Fired() - firedBefore;
    std::fprintf(stderr,
                 "many: %s %zu: server timer operations in the window: %.1f sets/s, %.1f "
                 "cancels/s, %.1f expiries/s; %llu timers live at the end\n",
                 row.queue.c_str(), count, static_cast<double>(monitor.Set() - setBefore) / window,
                 static_cast<double>(monitor.CancelCalls() - cancelledBefore) / window,
                 static_cast<double>(fired) / window,
                 static_cast<unsigned long long>(monitor.LiveTimers()));
    const std::uint64_t messages = received - receivedBefore;
    const std::size_t rssAfter = ResidentBytes();
    const std::size_t heapAfter = mallinfo2().uordblks;
    const std::size_t open = server.GetStatistics().connectionsOpen;
    row.cpuPercent = 100.0 * cpu / window;
    if (open > 0) {
      // Includes the benchmark's own per-connection reader (a Connection handle, a receive
      // buffer and a closure): what any application would hold.
      row.bytesPerConnection = static_cast<double>(heapAfter - std::min(heapAfter, heapBefore)) /
                               static_cast<double>(open);
      row.residentPerConnection =
          static_cast<double>(rssAfter - std::min(rssAfter, rssBefore)) / static_cast<double>(open);
    }
    row.timerFiringsPerSecond = static_cast<double>(fired) / window;
    row.messages = messages;
    row.messagesPerSecond = static_cast<double>(messages) / window;
    row.cpuMicrosecondsPerMessage = messages > 0 ? cpu * 1e6 / static_cast<double>(messages) : 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      row.latencyMs = ComputePercentiles(latencies);
    }
    serverTotals().PrintSince(totalsBefore, row.queue, count);
    std::fprintf(stderr, "many: %s %zu: %zu connections open at the end of the window\n",
                 row.queue.c_str(), count, open);
    if (open != count) std::fprintf(stderr, "many: only %zu of %zu connected\n", open, count);
    kill(child, SIGTERM);
    int status = 0;
    rusage clientUsage{};
    wait4(child, &status, 0, &clientUsage);
    row.clientCpuSeconds = static_cast<double>(clientUsage.ru_utime.tv_sec) +
                           static_cast<double>(clientUsage.ru_utime.tv_usec) / 1e6 +
                           static_cast<double>(clientUsage.ru_stime.tv_sec) +
                           static_cast<double>(clientUsage.ru_stime.tv_usec) / 1e6;
    row.clientSeconds = std::chrono::duration<double>(Clock::now() - connectStart).count();
    // Closing ends every connection at once: a million ends must stay linear (SlotTable).
    const auto closeStart = Clock::now();
    server.Close();
    // The io thread may still be running handlers that use this block's locals (an accept the
    // clients' last datagrams completed before the Close, which calls `accept` again): it must
    // be done before they go. (Once a 1M run that connected only 188k crashed here.)
    work.reset();
    for (auto& thread : threads) thread.join();
    // From Close to the io threads' end: ending the connections is nearly all of it.
    std::fprintf(stderr, "many: %s %zu: the server closed %zu connections in %.2f s\n",
                 row.queue.c_str(), count, open,
                 std::chrono::duration<double>(Clock::now() - closeStart).count());
  }
  return row;
}

int RunManyServer(std::size_t count, double rate, double window, const std::string& path) {
  rudp::EndpointOptions options;
  if (path == "unbatched") {
    options.batchedIo = false;
  } else if (path != "batched") {
    std::fprintf(stderr, "--many-server: the path is batched or unbatched, not %s\n", path.c_str());
    return 2;
  }
  const ManyRow row = RunMany(rudp::TimerQueueKind::Wheel, count, rate, window, options);
  std::printf(
      "many-server %s: %zu connections x %.1f/s, %.1f s window: %llu messages delivered "
      "(%.0f/s), server CPU %.2f %%, %.2f us per message, p99 %.2f ms\n",
      path.c_str(), count, rate, window, static_cast<unsigned long long>(row.messages),
      static_cast<double>(row.messages) / window, row.cpuPercent, row.cpuMicrosecondsPerMessage,
      row.latencyMs.p99);
  return 0;
}

}  // namespace timerwheel::perf
