// The transport benchmark: ReliableUDP side by side with ENet and TCP, through the impairment
// relay, in one run on one machine; then many connections on one ReliableUDP server socket with
// the TimerWheel and with the TimerQueue as its timer queue.
//
// Usage: TransportBenchmark [--quick | --full] [--results DIR] [--only latency|bulk|many]...
//                           [--idle N]...
//   (none)   the short form run by tools/bench: every table, one seed, short runs (~4 minutes)
//   --quick  a smoke run for the test command (well under a minute; numbers mean little)
//   --full   the whole grid, 3 seeds per point, longer runs, 100k idle connections
//   --only   run just these parts (default: all three)
//   --idle   just this many idle connections in the many part (repeatable; no active run)
// Internal: TransportBenchmark --clients <port> <count> <messages-per-second> <seconds>
//   (the client side of the many-connections workload, run as a child process so that the
//   server's CPU and memory are measured alone)
//
// Linux only (fork/exec, /proc, getrusage), like TimerWheelBenchmark.
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "Relay/ImpairmentRelay.h"
#include "ReliableUDP/Endpoint.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"
#include "Transport/EnetTransport.h"
#include "Transport/ReliableUdpTransport.h"
#include "Transport/TcpTransport.h"

using namespace timerwheel;
using namespace timerwheel::perf;
using Clock = std::chrono::steady_clock;
using Udp = boost::asio::ip::udp;

namespace {

// --- Measuring -------------------------------------------------------------------------------

std::uint64_t NowMicroseconds() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
          .count());
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double ThreadCpuSeconds(pthread_t thread) {
  clockid_t clock;
  if (pthread_getcpuclockid(thread, &clock) != 0) return 0;
  timespec time{};
  clock_gettime(clock, &time);
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_nsec) / 1e9;
}

std::size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
  std::size_t count = 0;
};

Percentiles ComputePercentiles(std::vector<double> values) {
  Percentiles result;
  result.count = values.size();
  if (values.empty()) return result;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    const auto index =
        static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
    return values[std::min(index, values.size() - 1)];
  };
  result.p50 = at(0.50);
  result.p90 = at(0.90);
  result.p99 = at(0.99);
  result.max = values.back();
  return result;
}

// --- The relay, on a thread of its own ---------------------------------------------------------

class RelayThread {
 public:
  RelayThread(std::uint16_t upstreamPort, const relay::ImpairmentProfile& toServer,
              const relay::ImpairmentProfile& toClient, std::uint64_t seed)
      : m_work(m_io.get_executor()),
        m_relay(m_io, Udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), 0),
                Udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), upstreamPort),
                toServer, toClient, seed),
        m_thread([this] { m_io.run(); }) {}
  ~RelayThread() {
    m_relay.Close();
    m_work.reset();
    m_thread.join();
  }
  std::uint16_t Port() const { return m_relay.LocalEndpoint().port(); }
  double CpuSeconds() { return ThreadCpuSeconds(m_thread.native_handle()); }
  relay::LinkCounters ToServer() const { return m_relay.ToUpstreamCounters(); }
  relay::LinkCounters ToClient() const { return m_relay.ToClientCounters(); }

 private:
  boost::asio::io_context m_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> m_work;
  relay::ImpairmentRelay m_relay;
  std::thread m_thread;
};

// --- Transports --------------------------------------------------------------------------------

enum class Kind { ReliableUdp, ReliableUdpKnownPath, Enet, Tcp };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::ReliableUdp:
      return "ReliableUDP";
    case Kind::ReliableUdpKnownPath:
      return "ReliableUDP known-path";
    case Kind::Enet:
      return "ENet";
    case Kind::Tcp:
      return "TCP (loopback, no relay)";
  }
  return "?";
}

std::unique_ptr<ITransportUnderTest> MakeTransport(Kind kind) {
  rudp::EndpointOptions options;
  switch (kind) {
    case Kind::ReliableUdp:
      return MakeReliableUdpTransport(options, KindName(kind));
    case Kind::ReliableUdpKnownPath:
      options.congestionControl = rudp::CongestionControl::None;
      return MakeReliableUdpTransport(options, KindName(kind));
    case Kind::Enet:
      return MakeEnetTransport();
    case Kind::Tcp:
      return MakeTcpTransport();
  }
  return nullptr;
}

relay::ImpairmentProfile PathProfile(double loss) {
  relay::ImpairmentProfile profile;
  profile.loss = loss;
  profile.delay = 10'000;  // 10 ms one way
  return profile;
}

// A transport, its server's receive handler, and (except TCP) the relay in front of it.
struct Setup {
  std::unique_ptr<ITransportUnderTest> transport;
  std::unique_ptr<RelayThread> relay;
};

// --- Latency -----------------------------------------------------------------------------------

struct LatencyRow {
  std::string transport;
  double loss = 0;
  Percentiles latencyMs;
  std::uint64_t messages = 0;
  std::uint64_t retransmissions = 0;
  std::int64_t spurious = -1;
  double wirePerAppByte = 0;
};

LatencyRow RunLatency(Kind kind, double loss, std::uint64_t seed, double seconds) {
  constexpr std::size_t kMessageSize = 64;
  constexpr int kRate = 100;  // messages per second
  LatencyRow row;
  row.transport = KindName(kind);
  row.loss = loss;
  auto transport = MakeTransport(kind);
  std::mutex mutex;
  std::vector<double> latencies;
  const std::uint16_t serverPort =
      transport->StartServer([&](const std::uint8_t* data, std::size_t size) {
        if (size < 8) return;
        std::uint64_t stamp = 0;
        std::memcpy(&stamp, data, 8);
        const double ms = static_cast<double>(NowMicroseconds() - stamp) / 1000.0;
        std::lock_guard<std::mutex> lock(mutex);
        latencies.push_back(ms);
      });
  std::unique_ptr<RelayThread> relay;
  std::uint16_t port = serverPort;
  if (kind != Kind::Tcp) {
    relay = std::make_unique<RelayThread>(serverPort, PathProfile(loss), PathProfile(loss), seed);
    port = relay->Port();
  }
  transport->Connect(port);
  const auto count = static_cast<std::uint64_t>(seconds * kRate);
  std::uint8_t message[kMessageSize] = {};
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < count; ++i) {
    std::this_thread::sleep_until(start + std::chrono::microseconds(i * 1'000'000 / kRate));
    const std::uint64_t stamp = NowMicroseconds();
    std::memcpy(message, &stamp, 8);
    std::memcpy(message + 8, &i, 8);
    if (!transport->Send(message, kMessageSize)) break;
  }
  transport->Flush(60'000);
  const TransportCounters counters = transport->ClientCounters();
  transport->Stop();
  relay.reset();
  {
    std::lock_guard<std::mutex> lock(mutex);
    row.latencyMs = ComputePercentiles(latencies);
    row.messages = latencies.size();
  }
  row.retransmissions = counters.retransmissions;
  row.spurious = counters.spuriousRetransmissions;
  row.wirePerAppByte =
      static_cast<double>(counters.wireBytesSent) / static_cast<double>(count * kMessageSize);
  return row;
}

// --- Bulk --------------------------------------------------------------------------------------

struct BulkRow {
  std::string transport;
  std::string path;
  double loss = 0;
  double goodputMBps = 0;
  double wirePerAppByte = 0;
  double cpuMsPerMB = 0;
  std::uint64_t retransmissions = 0;
  std::uint64_t queueDrops = 0;  // at the relay's rate-limited queue
};

BulkRow RunBulk(Kind kind, const relay::ImpairmentProfile& path, const std::string& pathName,
                std::uint64_t seed, double seconds) {
  constexpr std::size_t kMessageSize = 1200;
  BulkRow row;
  row.transport = KindName(kind);
  row.path = pathName;
  row.loss = path.loss;
  auto transport = MakeTransport(kind);
  std::atomic<std::uint64_t> delivered{0};
  const std::uint16_t serverPort =
      transport->StartServer([&](const std::uint8_t*, std::size_t size) { delivered += size; });
  std::unique_ptr<RelayThread> relay;
  std::uint16_t port = serverPort;
  relay::ImpairmentProfile reverse = path;
  reverse.rateBitsPerSecond = 0;  // ACKs are not rate-limited
  reverse.queueLimitBytes = 0;
  if (kind != Kind::Tcp) {
    relay = std::make_unique<RelayThread>(serverPort, path, reverse, seed);
    port = relay->Port();
  }
  transport->Connect(port);
  std::vector<std::uint8_t> message(kMessageSize, 0x5A);
  const double cpuBefore = ProcessCpuSeconds() - (relay ? relay->CpuSeconds() : 0);
  const auto start = Clock::now();
  const auto stopSending = start + std::chrono::duration<double>(seconds);
  std::uint64_t sent = 0;
  while (Clock::now() < stopSending) {
    if (!transport->Send(message.data(), message.size())) break;
    sent += message.size();
  }
  transport->Flush(120'000);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = ProcessCpuSeconds() - (relay ? relay->CpuSeconds() : 0) - cpuBefore;
  const TransportCounters counters = transport->ClientCounters();
  if (relay) row.queueDrops = relay->ToServer().droppedQueue;
  transport->Stop();
  relay.reset();
  const double megabytes = static_cast<double>(delivered.load()) / 1e6;
  row.goodputMBps = megabytes / elapsed;
  row.wirePerAppByte =
      sent > 0 ? static_cast<double>(counters.wireBytesSent) / static_cast<double>(sent) : 0;
  row.cpuMsPerMB = megabytes > 0 ? cpu * 1000.0 / megabytes : 0;
  row.retransmissions = counters.retransmissions;
  return row;
}

// --- Many connections --------------------------------------------------------------------------

// The client side, in a child process: `count` connections to 127.0.0.1:port, each sending
// `rate` messages per second (0: idle) for `seconds`.
int RunClients(std::uint16_t port, std::size_t count, double rate, double seconds) {
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread thread([&] { io.run(); });
  int exitCode = 0;
  {
    rudp::EndpointOptions options;
    options.maxConnections = count + 10;
    rudp::Endpoint endpoint(io, Udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), 0),
                            options);
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::shared_ptr<rudp::Connection>> connections;
    std::size_t failed = 0;
    const Udp::endpoint server(boost::asio::ip::make_address_v4("127.0.0.1"), port);
    // Connect in batches so the server's accept backlog is never the bottleneck.
    for (std::size_t i = 0; i < count; ++i) {
      endpoint.AsyncConnect(server,
                            [&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
                              std::lock_guard<std::mutex> lock(mutex);
                              if (ec) {
                                ++failed;
                              } else {
                                connections.push_back(std::move(c));
                              }
                              changed.notify_all();
                            });
      if (i % 500 == 499) {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait_for(lock, std::chrono::seconds(30),
                         [&] { return connections.size() + failed >= i + 1; });
      }
    }
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait_for(lock, std::chrono::seconds(60),
                       [&] { return connections.size() + failed == count; });
      if (failed > 0) std::fprintf(stderr, "clients: %zu connections failed\n", failed);
    }
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    if (rate > 0) {
      // Round-robin over the connections so each sends `rate` per second, evenly spread.
      const double perSecond = rate * static_cast<double>(connections.size());
      std::vector<std::uint8_t> message(64, 0);
      std::uint64_t n = 0;
      while (Clock::now() < end) {
        std::this_thread::sleep_until(start + std::chrono::duration<double>(n / perSecond));
        const std::uint64_t stamp = NowMicroseconds();
        auto buffer = std::make_shared<std::vector<std::uint8_t>>(message);
        std::memcpy(buffer->data(), &stamp, 8);
        auto& connection = connections[n % connections.size()];
        connection->AsyncSend(boost::asio::buffer(*buffer), [buffer](boost::system::error_code) {});
        ++n;
      }
    } else {
      std::this_thread::sleep_until(end);
    }
    connections.clear();
    endpoint.Close();
  }
  work.reset();
  thread.join();
  return exitCode;
}

struct ManyRow {
  std::string queue;
  std::size_t connections = 0;
  double rate = 0;  // messages per second per connection
  double cpuPercent = 0;
  double bytesPerConnection = 0;     // heap in use (mallinfo2), per connection
  double residentPerConnection = 0;  // growth of the resident set, per connection
  double timerFiringsPerSecond = 0;
  double cpuMicrosecondsPerMessage = 0;
  Percentiles latencyMs;
};

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
                 "%llu, datagrams in %llu out %llu, send would-block %llu\n",
                 queue.c_str(), count, delta(fired[0], before.fired[0]),
                 delta(fired[1], before.fired[1]), delta(fired[2], before.fired[2]),
                 delta(fired[3], before.fired[3]), delta(fired[4], before.fired[4]),
                 delta(probeTimeouts, before.probeTimeouts), delta(packetsLost, before.packetsLost),
                 delta(endpoint.datagramsReceived, before.endpoint.datagramsReceived),
                 delta(endpoint.datagramsSent, before.endpoint.datagramsSent),
                 delta(endpoint.sendWouldBlock, before.endpoint.sendWouldBlock));
  }
};

pid_t SpawnClients(std::uint16_t port, std::size_t count, double rate, double seconds) {
  const std::string portText = std::to_string(port), countText = std::to_string(count),
                    rateText = std::to_string(rate), secondsText = std::to_string(seconds);
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "TransportBenchmark", "--clients", portText.c_str(), countText.c_str(),
          rateText.c_str(), secondsText.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

ManyRow RunMany(rudp::TimerQueueKind queueKind, std::size_t count, double rate, double window) {
  ManyRow row;
  row.queue = queueKind == rudp::TimerQueueKind::Wheel ? "wheel" : "heap";
  row.connections = count;
  row.rate = rate;
  CountingTimerQueueMonitor monitor;
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread thread([&] { io.run(); });
  {
    rudp::EndpointOptions options;
    options.acceptIncoming = true;
    options.timerQueue = queueKind;
    options.timerMonitor = &monitor;
    options.maxConnections = count + 10;
    options.acceptBacklog = count + 10;
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
    const pid_t child = SpawnClients(server.LocalEndpoint().port(), count, rate,
                                     window + settle + 30.0 + static_cast<double>(count) / 2000.0);
    const auto connectDeadline = Clock::now() + std::chrono::seconds(120);
    while (server.GetStatistics().connectionsOpen < count && Clock::now() < connectDeadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling a counter
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
    const double cpuBefore = ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::duration<double>(window));
    const double cpu = ProcessCpuSeconds() - cpuBefore;
    const auto fired = monitor.Fired() - firedBefore;
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
    row.cpuMicrosecondsPerMessage = messages > 0 ? cpu * 1e6 / static_cast<double>(messages) : 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      row.latencyMs = ComputePercentiles(latencies);
    }
    serverTotals().PrintSince(totalsBefore, row.queue, count);
    if (open != count) std::fprintf(stderr, "many: only %zu of %zu connected\n", open, count);
    kill(child, SIGTERM);
    int status = 0;
    waitpid(child, &status, 0);
    server.Close();
  }
  work.reset();
  thread.join();
  return row;
}

// --- Reporting ---------------------------------------------------------------------------------

struct Settings {
  std::string results = "Perf/results";
  int seeds = 1;
  std::vector<double> losses{0.0, 0.01, 0.05, 0.10};
  double latencySeconds = 6;
  double bulkSeconds = 3;
  double manyWindow = 16;
  std::vector<std::size_t> idleCounts{1000, 10000};
  std::size_t activeCount = 10000;
  std::vector<std::string> only;  // empty: every part
  bool Runs(const std::string& part) const {
    return only.empty() || std::find(only.begin(), only.end(), part) != only.end();
  }
};

std::string Percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%g%%", fraction * 100);
  return text;
}

void RunLatencyTable(const Settings& settings, const std::vector<double>& losses);
void RunBulkTable(const Settings& settings, const std::vector<double>& losses);
void RunManyTable(const Settings& settings);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--clients") == 0) {
    return RunClients(static_cast<std::uint16_t>(std::atoi(argv[2])),
                      static_cast<std::size_t>(std::atoll(argv[3])), std::atof(argv[4]),
                      std::atof(argv[5]));
  }
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      settings.losses = {0.0, 0.05};
      settings.latencySeconds = 1;
      settings.bulkSeconds = 0.5;
      settings.manyWindow = 2;
      settings.idleCounts = {200};
      settings.activeCount = 200;
    } else if (arg == "--full") {
      settings.seeds = 3;
      settings.latencySeconds = 30;
      settings.bulkSeconds = 10;
      settings.manyWindow = 60;
      settings.idleCounts = {1000, 10000, 100000};
    } else if (arg == "--idle" && i + 1 < argc) {
      // Only these idle counts (repeatable), and no active run: one point of the grid.
      if (settings.activeCount != 0) settings.idleCounts.clear();
      settings.activeCount = 0;
      settings.idleCounts.push_back(static_cast<std::size_t>(std::atoll(argv[++i])));
    } else if (arg == "--results" && i + 1 < argc) {
      settings.results = argv[++i];
    } else if (arg == "--only" && i + 1 < argc) {
      settings.only.push_back(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick | --full] [--results DIR] [--only latency|bulk|many]... "
                   "[--idle N]...\n",
                   argv[0]);
      return 2;
    }
  }
  std::system(("mkdir -p '" + settings.results + "'").c_str());
  const std::vector<double>& losses = settings.losses;

  if (settings.Runs("latency")) RunLatencyTable(settings, losses);
  if (settings.Runs("bulk")) RunBulkTable(settings, losses);
  if (settings.Runs("many")) RunManyTable(settings);
  return 0;
}

namespace {

// One gnuplot data block per series: "loss% value" lines, the mean over seeds per loss level.
struct Series {
  std::string title;
  std::vector<std::pair<double, std::vector<double>>> points;  // loss -> values (one per seed)
  void Add(double loss, double value) {
    for (auto& point : points) {
      if (point.first == loss) return point.second.push_back(value);
    }
    points.push_back({loss, {value}});
  }
};

void WriteSeries(const std::vector<Series>& series, const std::string& path) {
  std::ofstream out(path);
  for (const Series& one : series) {
    out << '"' << one.title << "\"\n";
    for (const auto& [loss, values] : one.points) {
      double sum = 0;
      for (double value : values) sum += value;
      out << loss * 100 << ' ' << sum / static_cast<double>(values.size()) << '\n';
    }
    out << "\n\n";
  }
}

void Plot(const std::string& results, const std::string& name, const std::string& title,
          const std::string& ylabel, std::size_t seriesCount) {
  const std::string script = results + "/" + name + ".gnuplot";
  {
    std::ofstream plot(script);
    plot << "set terminal pngcairo size 900,560 noenhanced\nset grid\nset key left top\n"
         << "set logscale y\nset xlabel 'loss per direction, %'\nset ylabel '" << ylabel << "'\n"
         << "set title '" << title << "'\nset output '" << results << "/" << name << ".png'\n"
         << "plot for [i=0:" << seriesCount - 1 << "] '" << results << "/" << name
         << ".dat' index i using 1:2 with linespoints title columnheader(1)\n";
  }
  const std::string command = "gnuplot '" + script + "' 2>/dev/null";
  if (std::system(command.c_str()) == 0) {
    std::printf("plot: %s/%s.png\n", results.c_str(), name.c_str());
  } else {
    std::printf("gnuplot not found or failed: %s.png not made\n", name.c_str());
  }
}

void RunLatencyTable(const Settings& settings, const std::vector<double>& losses) {
  std::printf("=== latency: 64-byte messages at 100/s, relay 10 ms each way, loss per direction\n");
  std::printf("%-26s %6s %8s %8s %8s %8s %8s %8s %8s %10s\n", "transport", "loss", "p50 ms",
              "p90 ms", "p99 ms", "max ms", "msgs", "retx", "spurious", "wire/app");
  std::ofstream latencyCsv(settings.results + "/transport-latency.csv");
  latencyCsv << "transport,loss,seed,p50_ms,p90_ms,p99_ms,max_ms,messages,retransmissions,"
                "spurious,wire_per_app_byte\n";
  auto printLatency = [&](const LatencyRow& row, std::uint64_t seed) {
    std::printf("%-26s %6s %8.2f %8.2f %8.2f %8.2f %8llu %8llu %8lld %10.3f\n",
                row.transport.c_str(), Percent(row.loss).c_str(), row.latencyMs.p50,
                row.latencyMs.p90, row.latencyMs.p99, row.latencyMs.max,
                static_cast<unsigned long long>(row.messages),
                static_cast<unsigned long long>(row.retransmissions),
                static_cast<long long>(row.spurious), row.wirePerAppByte);
    std::fflush(stdout);
    latencyCsv << row.transport << ',' << row.loss << ',' << seed << ',' << row.latencyMs.p50 << ','
               << row.latencyMs.p90 << ',' << row.latencyMs.p99 << ',' << row.latencyMs.max << ','
               << row.messages << ',' << row.retransmissions << ',' << row.spurious << ','
               << row.wirePerAppByte << '\n';
  };
  printLatency(RunLatency(Kind::Tcp, 0, 1, settings.latencySeconds), 1);
  std::vector<Series> series{
      {"ReliableUDP p50", {}}, {"ReliableUDP p99", {}}, {"ENet p50", {}}, {"ENet p99", {}}};
  for (double loss : losses) {
    for (int seed = 1; seed <= settings.seeds; ++seed) {
      for (Kind kind : {Kind::ReliableUdp, Kind::Enet}) {
        const LatencyRow row =
            RunLatency(kind, loss, static_cast<std::uint64_t>(seed), settings.latencySeconds);
        printLatency(row, static_cast<std::uint64_t>(seed));
        const std::size_t first = kind == Kind::ReliableUdp ? 0 : 2;
        series[first].Add(loss, row.latencyMs.p50);
        series[first + 1].Add(loss, row.latencyMs.p99);
      }
    }
  }
  latencyCsv.close();
  WriteSeries(series, settings.results + "/transport-latency.dat");
  Plot(settings.results, "transport-latency",
       "One-way latency of 64-byte messages at 100/s, 10 ms each way", "latency, ms",
       series.size());
}

void RunBulkTable(const Settings& settings, const std::vector<double>& losses) {
  std::printf(
      "\n=== bulk: 1200-byte messages as fast as the transport takes them, relay 10 ms each "
      "way\n");
  std::printf("%-26s %-22s %6s %10s %10s %10s %8s %8s\n", "transport", "path", "loss", "MB/s",
              "wire/app", "CPU ms/MB", "retx", "qdrops");
  std::ofstream bulkCsv(settings.results + "/transport-bulk.csv");
  bulkCsv << "transport,path,loss,seed,goodput_MBps,wire_per_app_byte,cpu_ms_per_MB,"
             "retransmissions,queue_drops\n";
  auto printBulk = [&](const BulkRow& row, std::uint64_t seed) {
    std::printf("%-26s %-22s %6s %10.2f %10.3f %10.1f %8llu %8llu\n", row.transport.c_str(),
                row.path.c_str(), Percent(row.loss).c_str(), row.goodputMBps, row.wirePerAppByte,
                row.cpuMsPerMB, static_cast<unsigned long long>(row.retransmissions),
                static_cast<unsigned long long>(row.queueDrops));
    std::fflush(stdout);
    bulkCsv << row.transport << ',' << row.path << ',' << row.loss << ',' << seed << ','
            << row.goodputMBps << ',' << row.wirePerAppByte << ',' << row.cpuMsPerMB << ','
            << row.retransmissions << ',' << row.queueDrops << '\n';
  };
  printBulk(RunBulk(Kind::Tcp, PathProfile(0), "loopback", 1, settings.bulkSeconds), 1);
  std::vector<Series> series{{KindName(Kind::ReliableUdp), {}},
                             {KindName(Kind::ReliableUdpKnownPath), {}},
                             {KindName(Kind::Enet), {}}};
  for (double loss : losses) {
    for (int seed = 1; seed <= settings.seeds; ++seed) {
      std::size_t index = 0;
      for (Kind kind : {Kind::ReliableUdp, Kind::ReliableUdpKnownPath, Kind::Enet}) {
        const BulkRow row = RunBulk(kind, PathProfile(loss), "10 ms",
                                    static_cast<std::uint64_t>(seed), settings.bulkSeconds);
        printBulk(row, static_cast<std::uint64_t>(seed));
        series[index++].Add(loss, row.goodputMBps);
      }
    }
  }
  WriteSeries(series, settings.results + "/transport-goodput.dat");
  Plot(settings.results, "transport-goodput", "Bulk goodput of 1200-byte messages, 10 ms each way",
       "goodput, MB/s", series.size());
  relay::ImpairmentProfile capped = PathProfile(0);
  capped.rateBitsPerSecond = 50e6;
  capped.queueLimitBytes = 64 * 1024;
  for (Kind kind : {Kind::ReliableUdp, Kind::Enet}) {
    printBulk(RunBulk(kind, capped, "10 ms, 50 Mbit/s, 64 KB", 1, settings.bulkSeconds), 1);
  }
}

void RunManyTable(const Settings& settings) {
  std::printf(
      "\n=== many connections on one server socket (clients in a child process), "
      "keepalive 15 s\n");
  std::printf("%-6s %8s %8s %8s %12s %12s %12s %12s %9s\n", "queue", "conns", "msg/s", "CPU %",
              "heap B/conn", "RSS B/conn", "timers/s", "CPU us/msg", "p99 ms");
  std::ofstream manyCsv(settings.results + "/transport-many.csv");
  manyCsv << "queue,connections,rate_per_connection,cpu_percent,heap_bytes_per_connection,"
             "resident_bytes_per_connection,timer_firings_per_second,cpu_us_per_message,p50_ms,"
             "p99_ms\n";
  auto printMany = [&](const ManyRow& row) {
    std::printf("%-6s %8zu %8.0f %8.2f %12.0f %12.0f %12.1f %12.1f %9.2f\n", row.queue.c_str(),
                row.connections, row.rate * static_cast<double>(row.connections), row.cpuPercent,
                row.bytesPerConnection, row.residentPerConnection, row.timerFiringsPerSecond,
                row.cpuMicrosecondsPerMessage, row.latencyMs.p99);
    std::fflush(stdout);
    manyCsv << row.queue << ',' << row.connections << ',' << row.rate << ',' << row.cpuPercent
            << ',' << row.bytesPerConnection << ',' << row.residentPerConnection << ','
            << row.timerFiringsPerSecond << ',' << row.cpuMicrosecondsPerMessage << ','
            << row.latencyMs.p50 << ',' << row.latencyMs.p99 << '\n';
  };
  for (std::size_t count : settings.idleCounts) {
    for (auto kind : {rudp::TimerQueueKind::Wheel, rudp::TimerQueueKind::Heap}) {
      printMany(RunMany(kind, count, 0, settings.manyWindow));
    }
  }
  if (settings.activeCount == 0) return;
  for (auto kind : {rudp::TimerQueueKind::Wheel, rudp::TimerQueueKind::Heap}) {
    printMany(RunMany(kind, settings.activeCount, 1, settings.manyWindow / 2));
  }
}

}  // namespace
