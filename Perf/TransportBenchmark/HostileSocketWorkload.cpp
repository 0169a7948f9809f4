// The hostile part over real sockets. Each row runs on a fresh server Endpoint (defaults, as a
// user runs it, on one io thread), a fresh legitimate client Endpoint (its own io thread) on
// 127.0.0.1 sending a 64-byte message every 2 ms that the server echoes, and, but for the
// unattacked rows, a SocketAttacker on 127.0.0.2 in a thread of its own sending one attack paced
// at 1 MB/s. Server CPU is the server io thread's CPU clock only (pthread_getcpuclockid), so the
// client's and the attacker's threads are not in it (the attacker's own CPU is reported beside
// it). A row has two phases: the latency window (the round trips' p50/p99), then a CPU phase
// with the client paused, whose server CPU, less the idle server's, over the datagrams received
// is the CPU per attack datagram. A control row aims the same sending at a plain UDP reader.
#include "TransportBenchmark/HostileSocketWorkload.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "TransportBenchmark/Measure.h"
#include "TransportBenchmark/SocketAttacker.h"

namespace timerwheel::perf {
namespace {

namespace detail = rudp::detail;
using Udp = boost::asio::ip::udp;
using Bytes = std::vector<std::uint8_t>;

constexpr double kAttackBytesPerSecond = 1e6;
constexpr auto kRoundTripInterval = std::chrono::milliseconds(2);
constexpr std::size_t kMessageSize = 64;
// What the server's application sends each attacker connection when the attack needs the server
// to send (a download the attacker asked for): 16 messages of 64 KiB.
constexpr std::size_t kDownloadMessages = 16;
constexpr std::size_t kDownloadMessageSize = 64 * 1024;

const Udp::endpoint kClientAddress(boost::asio::ip::make_address_v4("127.0.0.1"), 0);
const Udp::endpoint kAttackerAddress(boost::asio::ip::make_address_v4("127.0.0.2"), 0);

class IoThread {
 public:
  IoThread() : m_work(m_io.get_executor()), m_thread([this] { m_io.run(); }) {}
  ~IoThread() {
    m_work.reset();
    m_thread.join();
  }
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;
  boost::asio::io_context& Io() { return m_io; }
  double CpuSeconds() { return ThreadCpuSeconds(m_thread.native_handle()); }

 private:
  boost::asio::io_context m_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> m_work;
  std::thread m_thread;
};

// One accepted connection of the server's application: the legitimate one is echoed, an
// attacker's gets the download if the attack asks for it; what they send is read and dropped.
struct ServerPeer : std::enable_shared_from_this<ServerPeer> {
  std::shared_ptr<rudp::Connection> connection;
  Bytes incoming;
  bool echo = false;

  void Receive() {
    connection->AsyncReceive(incoming, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      if (self->echo) {
        auto copy = std::make_shared<Bytes>(self->incoming);
        self->connection->AsyncSend(boost::asio::buffer(*copy),
                                    [copy](boost::system::error_code) {});
      }
      self->Receive();
    });
  }
  void Download() {
    static const Bytes payload(kDownloadMessageSize, 0x5A);
    for (std::size_t i = 0; i < kDownloadMessages; ++i) {
      connection->AsyncSend(boost::asio::buffer(payload), [](boost::system::error_code) {});
    }
  }
};

// The server's application: accepts forever; keeps each connection until it ends.
struct ServerApplication : std::enable_shared_from_this<ServerApplication> {
  rudp::Endpoint* endpoint = nullptr;
  bool download = false;
  bool first = true;
  std::promise<void> legitimateAccepted;

  void Accept() {
    endpoint->AsyncAccept([self = shared_from_this()](boost::system::error_code ec,
                                                      std::shared_ptr<rudp::Connection> c) {
      if (ec) return;
      auto peer = std::make_shared<ServerPeer>();
      peer->connection = std::move(c);
      peer->echo = self->first;
      peer->Receive();
      if (!self->first && self->download) peer->Download();
      // Held by its own handler until it ends.
      peer->connection->AsyncWaitClosed([peer](boost::system::error_code) {});
      if (self->first) self->legitimateAccepted.set_value();
      self->first = false;
      self->Accept();
    });
  }
};

// The legitimate client: a 64-byte message every 2 ms carrying its send time; the echo's round
// trip is recorded while `recording`.
struct Pinger : std::enable_shared_from_this<Pinger> {
  explicit Pinger(boost::asio::io_context& io) : timer(io) {}
  boost::asio::steady_timer timer;
  std::shared_ptr<rudp::Connection> connection;
  Bytes incoming;
  std::atomic<bool> recording{false}, paused{false}, stopped{false};
  std::mutex mutex;
  std::vector<double> roundTripsUs;

  void Start() {
    timer.expires_after(kRoundTripInterval);
    Tick();
    Receive();
  }
  void Tick() {
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      if (self->paused) {
        self->timer.expires_at(self->timer.expiry() + kRoundTripInterval);
        return self->Tick();
      }
      auto message = std::make_shared<Bytes>(kMessageSize, 0x33);
      const std::uint64_t stamp = NowMicroseconds();
      std::memcpy(message->data(), &stamp, sizeof stamp);
      self->connection->AsyncSend(boost::asio::buffer(*message),
                                  [message](boost::system::error_code) {});
      self->timer.expires_at(self->timer.expiry() + kRoundTripInterval);
      self->Tick();
    });
  }
  void Receive() {
    connection->AsyncReceive(incoming, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      std::uint64_t stamp = 0;
      if (self->incoming.size() >= sizeof stamp && self->recording) {
        std::memcpy(&stamp, self->incoming.data(), sizeof stamp);
        std::lock_guard<std::mutex> lock(self->mutex);
        self->roundTripsUs.push_back(static_cast<double>(NowMicroseconds() - stamp));
      }
      self->Receive();
    });
  }
};

// An attack: how many connections the attacker opens first, whether the server's application
// sends to them, and what makes the next attack datagram (false: nothing to send now). `make`
// returns a fresh generator (its state) for each run.
using Generator = std::function<bool(SocketAttacker&, Bytes&)>;
struct Attack {
  const char* name;
  const char* bound;
  int sessions = 0;
  bool download = false;
  bool memory = false;  // a memory or admission attack: the memory table has its row
  std::function<Generator()> make;
  // A control, not an attack: the same sending aimed at a plain UDP socket read by a thread of
  // its own (no ReliableUDP work): what the attacker's sending alone costs the machine.
  bool control = false;
};

// Reopens the attacker's connection once the server ended it (violations, skipped numbers).
bool Live(SocketAttacker& attacker, std::size_t& current) {
  if (attacker.sessions.empty()) return false;
  if (!attacker.sessions[current].closed) return true;
  const int session = attacker.Connect();
  if (session < 0) return false;
  current = static_cast<std::size_t>(session);
  return true;
}

std::vector<Attack> Attacks() {
  return {
      {"ACK ranges repeated, one packet held", "O(ranges x log records) per frame (1)", 1, true,
       false,
       [] {
         return Generator(
             [held = std::optional<detail::PacketNumber>()](SocketAttacker& a, Bytes& out) mutable {
               auto& session = a.sessions[0];
               if (session.seen.empty()) return false;
               if (!held) held = *session.seen.begin();  // never acknowledged
               const auto ranges = SocketAttacker::SeenRanges(session, *held);
               if (ranges.empty()) return false;
               out = a.DataPacket(session, [&](detail::PacketWriter& w) {
                 w.AppendAck(ranges.data(), ranges.size(), 0);
               });
               return true;
             });
       }},
      {"50 ACK frames per packet", "one ACK frame per packet (1)", 1, true, false,
       [] {
         return Generator([current = std::size_t{0}](SocketAttacker& a, Bytes& out) mutable {
           if (!Live(a, current)) return false;
           auto& session = a.sessions[current];
           auto ranges = SocketAttacker::SeenRanges(session, 0);
           if (ranges.empty()) return false;
           ranges.resize(std::min<std::size_t>(ranges.size(), 2));
           out = a.DataPacket(session, [&](detail::PacketWriter& w) {
             for (int i = 0; i < 50; ++i) w.AppendAck(ranges.data(), ranges.size(), 0);
           });
           return true;
         });
       }},
      {"64 KB datagrams", "dropped before parsing (1)", 0, false, false,
       [] {
         return Generator([](SocketAttacker&, Bytes& out) {
           out.assign(65'000, 0x14);
           return true;
         });
       }},
      {"scattered 1-byte STREAM frames, 16 connections", "1 KiB per frame, 256 ranges (2)", 16,
       false, true,
       [] {
         return Generator([count = std::uint64_t{0}](SocketAttacker& a, Bytes& out) mutable {
           auto& session = a.sessions[count % a.sessions.size()];
           const std::uint64_t round = count++ / a.sessions.size();
           out = a.DataPacket(session, [&](detail::PacketWriter& w) {
             for (std::uint64_t k = 0;; ++k) {
               // Never offset 0, so nothing is ever in order; 8 KiB apart inside 2 MiB.
               const std::uint64_t offset = 1 + (round * 131 + k * 8192) % ((2u << 20) - 2);
               std::size_t written = 0;
               std::uint8_t* data = w.AppendStreamHeader(offset, 1, &written);
               if (data == nullptr) break;
               *data = 0x41;
             }
           });
           return true;
         });
       }},
      {"handshake flood, one source", "1024 per address, refusals (3)", 0, false, true,
       [] {
         return Generator([](SocketAttacker& a, Bytes& out) {
           if (!a.NextHelloWithCookie(out)) out = a.Hello();
           return true;
         });
       }},
      {"handshake churn (open, abort)", "expiry list <= 2 x live + 64 (4)", 0, false, true,
       [] {
         return Generator([](SocketAttacker& a, Bytes& out) {
           std::size_t welcomed = 0;
           if (a.NextWelcomed(welcomed)) {
             out = a.DataPacket(a.sessions[welcomed], [](detail::PacketWriter& w) {
               w.AppendClose(detail::CloseCode::Aborted);
             });
             return true;
           }
           if (!a.NextHelloWithCookie(out)) out = a.Hello();
           return true;
         });
       }},
      {"slowloris, 16 connections (PINGs, no data ACKed)", "TimedOut after idle timeout (5)", 16,
       true, false,
       [] {
         return Generator([count = std::uint64_t{0}, lastPing = std::vector<Clock::time_point>()](
                              SocketAttacker& a, Bytes& out) mutable {
           lastPing.resize(a.sessions.size());
           const std::size_t index = count++ % a.sessions.size();
           auto& session = a.sessions[index];
           if (!session.withoutStream.empty()) {
             const detail::AckRange range{session.withoutStream.front(),
                                          session.withoutStream.front()};
             session.withoutStream.pop_front();
             out =
                 a.DataPacket(session, [&](detail::PacketWriter& w) { w.AppendAck(&range, 1, 0); });
             return true;
           }
           // A PING per connection every 20 ms: the low rate of a real slowloris.
           const auto now = Clock::now();
           if (now - lastPing[index] < std::chrono::milliseconds(20)) return false;
           lastPing[index] = now;
           out = a.DataPacket(session, [](detail::PacketWriter& w) { w.AppendPing(); });
           return true;
         });
       }},
      {"replayed PING (reflection)", "1 ACK per RTT, <= 3x bytes (6)", 1, false, false,
       [] {
         return Generator([ping = Bytes()](SocketAttacker& a, Bytes& out) mutable {
           if (ping.empty()) {
             ping = a.DataPacket(a.sessions[0], [](detail::PacketWriter& w) { w.AppendPing(); });
           }
           out = ping;
           return true;
         });
       }},
      {"optimistic ACK (reconnecting)", "ProtocolError at a skipped number (7)", 1, true, false,
       [] {
         return Generator([current = std::size_t{0}](SocketAttacker& a, Bytes& out) mutable {
           if (!Live(a, current)) return false;
           auto& session = a.sessions[current];
           if (session.seen.size() < 2) return false;
           // Everything from the first to the last number seen, gaps included.
           const detail::AckRange range{*session.seen.begin(), *session.seen.rbegin()};
           out = a.DataPacket(session, [&](detail::PacketWriter& w) { w.AppendAck(&range, 1, 0); });
           return true;
         });
       }},
      {"forged HelloWithCookie, live connection", "cookie verified every time (8)", 1, false, false,
       [] {
         return Generator([forged = Bytes()](SocketAttacker& a, Bytes& out) mutable {
           if (forged.empty()) {
             detail::DecodedPacket genuine;
             detail::DecodePacket(a.firstHelloWithCookie.data(), a.firstHelloWithCookie.size(),
                                  genuine);
             auto cookie = genuine.header.cookie;
             cookie[0] ^= 0x5A;
             forged.resize(detail::kHelloSize);
             detail::PacketWriter w(forged.data(), forged.size());
             w.BeginHelloWithCookie(genuine.header.source, cookie, genuine.header.parameters);
             forged.resize(w.Finish());
           }
           out = forged;
           return true;
         });
       }},
      {"control: 15-byte datagrams to a plain UDP reader", "- (no ReliableUDP work)", 0, false,
       false,
       [] {
         return Generator([](SocketAttacker&, Bytes& out) {
           out.assign(15, 0x0C);
           return true;
         });
       },
       true},
      {"Data for unknown connections", "Resets smaller, 1000/s (9)", 0, false, false,
       [] {
         return Generator(
             [id = std::uint64_t{0x0BAD000000000000}](SocketAttacker& a, Bytes& out) mutable {
               SocketAttacker::Session unknown;
               unknown.serverId = ++id * 0x9E3779B97F4A7C15ULL;
               out = a.DataPacket(
                   unknown, [](detail::PacketWriter& w) { w.AppendPing(); }, 100);
               return true;
             });
       }},
  };
}

struct Peak {
  std::uint64_t connectionsOpen = 0, receiveMemoryInUse = 0, receiveMemoryAllocated = 0;
  std::uint64_t handshakeExpiryEntries = 0, connectionSlots = 0, admissionAddresses = 0;
  std::size_t residentBytes = 0;
  void Take(const rudp::EndpointStatistics& s) {
    connectionsOpen = std::max(connectionsOpen, s.connectionsOpen);
    receiveMemoryInUse = std::max(receiveMemoryInUse, s.receiveMemoryInUse);
    receiveMemoryAllocated = std::max(receiveMemoryAllocated, s.receiveMemoryAllocated);
    handshakeExpiryEntries = std::max(handshakeExpiryEntries, s.handshakeExpiryEntries);
    connectionSlots = std::max(connectionSlots, s.connectionSlots);
    admissionAddresses = std::max(admissionAddresses, s.admissionAddresses);
    residentBytes = std::max(residentBytes, ResidentBytes());
  }
};

struct RunResult {
  Percentiles roundTripUs;
  double seconds = 0;
  double serverCpuSeconds = 0;
  std::uint64_t serverDatagrams = 0;  // received in the window
  std::uint64_t clientDatagrams = 0;  // sent by the legitimate client in the window
  std::uint64_t attackBytesSent = 0, attackDatagramsSent = 0, attackBytesReceived = 0;
  rudp::EndpointStatistics before, after;
  Peak peak;
  std::size_t residentBefore = 0;
  double attackerCpuSeconds = 0;  // the attacker's thread, in the latency window
  double attackSeconds = 0;       // from go to stop (both phases)
  // The CPU phase after the latency window, the legitimate client paused: the server's CPU and
  // the datagrams it received, all the attack's.
  double cpuPhaseSeconds = 0, cpuPhaseServerCpuSeconds = 0;
  std::uint64_t cpuPhaseDatagrams = 0;
};

// A plain UDP socket read by a thread of its own until destroyed (the control row's target).
class PlainReader {
 public:
  PlainReader() : m_socket(m_io, kClientAddress) {
    timeval timeout{0, 100'000};  // so that the thread sees `m_stop`
    ::setsockopt(m_socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    m_thread = std::thread([this] {
      std::array<std::uint8_t, 65536> buffer{};
      while (!m_stop) ::recv(m_socket.native_handle(), buffer.data(), buffer.size(), 0);
    });
  }
  ~PlainReader() {
    m_stop = true;
    m_thread.join();
  }
  PlainReader(const PlainReader&) = delete;
  PlainReader& operator=(const PlainReader&) = delete;
  Udp::endpoint LocalEndpoint() const { return m_socket.local_endpoint(); }

 private:
  boost::asio::io_context m_io;
  Udp::socket m_socket;
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

RunResult RunOne(const Attack* attack, double seconds, bool niceAttacker) {
  RunResult result;
  result.residentBefore = ResidentBytes();
  IoThread serverThread, clientThread;
  rudp::EndpointOptions serverOptions;
  serverOptions.acceptIncoming = true;
  rudp::Endpoint server(serverThread.Io(), kClientAddress, serverOptions);
  rudp::Endpoint client(clientThread.Io(), kClientAddress);
  auto application = std::make_shared<ServerApplication>();
  application->endpoint = &server;
  application->download = attack != nullptr && attack->download;
  auto accepted = application->legitimateAccepted.get_future();
  application->Accept();

  auto pinger = std::make_shared<Pinger>(clientThread.Io());
  std::promise<std::shared_ptr<rudp::Connection>> connected;
  client.AsyncConnect(server.LocalEndpoint(),
                      [&](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
                        connected.set_value(std::move(c));
                      });
  pinger->connection = connected.get_future().get();
  accepted.wait();
  if (!pinger->connection) throw std::runtime_error("hostile: the legitimate client failed");
  boost::asio::post(clientThread.Io(), [pinger] { pinger->Start(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // warm-up, not recorded

  // The attacker: opens its connections, says it is ready, attacks from `go` until `stop`.
  std::atomic<bool> ready{false}, go{false}, stop{false};
  std::thread attackerThread;
  std::uint64_t sentAtGo = 0, datagramsAtGo = 0, receivedAtGo = 0;
  SocketAttacker* attackerSeen = nullptr;
  std::unique_ptr<SocketAttacker> attacker;
  std::optional<PlainReader> plainReader;
  if (attack != nullptr && attack->control) plainReader.emplace();
  if (attack != nullptr) {
    attacker = std::make_unique<SocketAttacker>(
        kAttackerAddress, plainReader ? plainReader->LocalEndpoint() : server.LocalEndpoint());
    attackerSeen = attacker.get();
    attackerThread = std::thread([&, generator = attack->make()]() mutable {
      SocketAttacker& a = *attacker;
      // --attacker-nice: the attacker's thread at the lowest priority, so that on a shared
      // machine it takes only what the server and the client leave, as a host of its own would.
      if (niceAttacker) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
      for (int i = 0; i < attack->sessions; ++i) a.Connect();
      // Let the downloads start, so that there is something to acknowledge.
      for (int i = 0; i < 100; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        a.Drain();
      }
      ready = true;
      while (!go) std::this_thread::sleep_for(std::chrono::microseconds(100));
      sentAtGo = a.bytesSent;
      datagramsAtGo = a.datagramsSent;
      receivedAtGo = a.bytesReceived;
      const auto start = Clock::now();
      Bytes datagram;
      int sinceDrain = 0;
      while (!stop) {
        if (++sinceDrain >= 16) {
          a.Drain();
          sinceDrain = 0;
        }
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        const double due =
            elapsed * kAttackBytesPerSecond - static_cast<double>(a.bytesSent - sentAtGo);
        if (due > 0 && (attack->sessions == 0 || !a.sessions.empty()) && generator(a, datagram)) {
          a.Send(datagram);
        } else {
          a.Drain();
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
      a.Drain();
    });
    while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  // The measured window.
  result.before = server.GetStatistics();
  const auto clientBefore = client.GetStatistics();
  const double cpuBefore = serverThread.CpuSeconds();
  const double attackerCpuBefore =
      attackerThread.joinable() ? ThreadCpuSeconds(attackerThread.native_handle()) : 0;
  const auto start = Clock::now();
  pinger->recording = true;
  go = true;
  while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    result.peak.Take(server.GetStatistics());
  }
  result.serverCpuSeconds = serverThread.CpuSeconds() - cpuBefore;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  pinger->recording = false;
  result.after = server.GetStatistics();
  result.peak.Take(result.after);
  const auto clientAfter = client.GetStatistics();
  if (attackerThread.joinable()) {
    result.attackerCpuSeconds =
        ThreadCpuSeconds(attackerThread.native_handle()) - attackerCpuBefore;
  }

  // The CPU phase: the legitimate client pauses (what it had in flight lands first), so that
  // nearly all the server does is the attack's.
  pinger->paused = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto phaseBefore = server.GetStatistics();
  const double phaseCpuBefore = serverThread.CpuSeconds();
  const auto phaseStart = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.3, seconds / 3)));
  result.cpuPhaseServerCpuSeconds = serverThread.CpuSeconds() - phaseCpuBefore;
  result.cpuPhaseSeconds = std::chrono::duration<double>(Clock::now() - phaseStart).count();
  result.cpuPhaseDatagrams =
      server.GetStatistics().datagramsReceived - phaseBefore.datagramsReceived;
  result.attackSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  if (attackerThread.joinable()) attackerThread.join();
  result.serverDatagrams = result.after.datagramsReceived - result.before.datagramsReceived;
  result.clientDatagrams = clientAfter.datagramsSent - clientBefore.datagramsSent;
  if (attackerSeen != nullptr) {
    result.attackBytesSent = attackerSeen->bytesSent - sentAtGo;
    result.attackDatagramsSent = attackerSeen->datagramsSent - datagramsAtGo;
    result.attackBytesReceived = attackerSeen->bytesReceived - receivedAtGo;
  }
  {
    std::lock_guard<std::mutex> lock(pinger->mutex);
    result.roundTripUs = ComputePercentiles(pinger->roundTripsUs);
  }
  pinger->stopped = true;
  boost::asio::post(clientThread.Io(), [pinger] { pinger->timer.cancel(); });
  client.Close();
  server.Close();
  return result;
}

// The server counters an attack moved (those that say what held it).
std::string Counters(const RunResult& r) {
  const auto& a = r.after;
  const auto& b = r.before;
  std::string text;
  auto add = [&](const char* name, std::uint64_t value) {
    if (value == 0) return;
    if (!text.empty()) text += ", ";
    text += name + std::string("=") + std::to_string(value);
  };
  add("oversize", a.droppedOversize - b.droppedOversize);
  add("badCookie", a.droppedBadCookie - b.droppedBadCookie);
  add("violations", a.droppedProtocolViolation - b.droppedProtocolViolation);
  add("tooFragmented", a.droppedTooFragmented - b.droppedTooFragmented);
  add("overBudget", a.droppedOverMemoryBudget - b.droppedOverMemoryBudget);
  add("unknownConnection", a.droppedUnknownConnection - b.droppedUnknownConnection);
  add("accepted", a.connectionsAccepted - b.connectionsAccepted);
  add("refused", a.connectionsRefused - b.connectionsRefused);
  add("resets", a.statelessResetsSent - b.statelessResetsSent);
  add("suppressed", a.statelessRepliesSuppressed - b.statelessRepliesSuppressed);
  return text.empty() ? "-" : text;
}

double Ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0;
}

}  // namespace

void RunHostileSocketTable(const Settings& settings) {
  // Short form 3 s a row (13 rows), long enough for the handshake flood (416 a second at 1 MB/s)
  // to reach the per-address limit of 1024.
  const double seconds = settings.latencySeconds < 2 ? 0.5 : settings.latencySeconds / 2;
  const auto attacks = Attacks();
  const RunResult normal = RunOne(nullptr, seconds, false);
  std::vector<RunResult> results;
  for (const Attack& attack : attacks) {
    results.push_back(RunOne(&attack, seconds, settings.niceAttacker));
  }
  const RunResult normalAgain = RunOne(nullptr, seconds, false);

  const double idleCpuPerSecond = normal.cpuPhaseServerCpuSeconds / normal.cpuPhaseSeconds;
  const double normalNs = normal.serverCpuSeconds * 1e9 /
                          static_cast<double>(std::max<std::uint64_t>(1, normal.serverDatagrams));
  // The reference p99 is the lower of the two unattacked runs': on a shared machine either may be
  // inflated, and the lower makes the attacked rows' ratios the less flattering.
  const double normalP99 = std::min(normal.roundTripUs.p99, normalAgain.roundTripUs.p99);

  std::printf(
      "\n## Hostile peer over loopback sockets: a legitimate 64-byte round trip every 2 ms "
      "during each attack at ~1 MB/s (%.1f s per row)\n\n",
      seconds);
  std::printf(
      "| Attack | Sent MB/s | Attack datagrams at server | RTT p50 (us) | RTT p99 (us) | p99 / "
      "unattacked | Server CPU (%% of a core) | Attacker CPU (%% of a core) | Server CPU / "
      "attack datagram (ns) | x normal | Bytes to attacker / from it | Server counters | Bound "
      "(item) |\n");
  std::printf(
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- "
      "|\n");
  const std::string csvPath = settings.results + "/hostile-sockets.csv";
  std::FILE* csv = std::fopen(csvPath.c_str(), "w");
  if (csv != nullptr) {
    std::fprintf(csv,
                 "attack,sent_mb_per_s,attack_datagrams,p50_us,p99_us,p99_ratio,cpu_ns_per_"
                 "attack_datagram,cpu_ratio,reflection_ratio\n");
  }
  auto print = [&](const char* name, const RunResult& r, const char* bound, bool attacked) {
    const std::uint64_t attackDatagrams =
        r.serverDatagrams > r.clientDatagrams ? r.serverDatagrams - r.clientDatagrams : 0;
    // Unattacked: the server's CPU over the datagrams it received (each wakes the server alone:
    // epoll, recvmmsg, the engine, the echo's send). Attacked: the CPU phase's (legitimate
    // client paused) server CPU, less the idle server's, over the attack datagrams it received.
    double ns = r.serverCpuSeconds * 1e9 /
                static_cast<double>(std::max<std::uint64_t>(1, r.serverDatagrams));
    if (attacked) {
      const double extra = r.cpuPhaseServerCpuSeconds - idleCpuPerSecond * r.cpuPhaseSeconds;
      ns = r.cpuPhaseDatagrams > 0
               ? std::max(0.0, extra) * 1e9 / static_cast<double>(r.cpuPhaseDatagrams)
               : 0;
    }
    const std::string nsText =
        attacked && r.cpuPhaseDatagrams == 0 ? "-" : std::to_string(std::lround(ns));
    const double sent =
        r.attackSeconds > 0 ? static_cast<double>(r.attackBytesSent) / r.attackSeconds / 1e6 : 0;
    const double reflection =
        Ratio(static_cast<double>(r.attackBytesReceived), static_cast<double>(r.attackBytesSent));
    std::printf(
        "| %s | %.2f | %llu | %.0f | %.0f | %.2f | %.0f | %.0f | %s | %.2f | %s | %s | %s |\n",
        name, sent, static_cast<unsigned long long>(attacked ? attackDatagrams : r.serverDatagrams),
        r.roundTripUs.p50, r.roundTripUs.p99, Ratio(r.roundTripUs.p99, normalP99),
        100 * r.serverCpuSeconds / r.seconds, 100 * r.attackerCpuSeconds / r.seconds,
        nsText.c_str(), Ratio(ns, normalNs),
        attacked ? std::to_string(reflection).substr(0, 5).c_str() : "-",
        attacked ? Counters(r).c_str() : "-", bound);
    if (csv != nullptr) {
      std::fprintf(csv, "\"%s\",%.3f,%llu,%.0f,%.0f,%.3f,%.0f,%.3f,%.4f\n", name, sent,
                   static_cast<unsigned long long>(attackDatagrams), r.roundTripUs.p50,
                   r.roundTripUs.p99, Ratio(r.roundTripUs.p99, normalP99), ns, Ratio(ns, normalNs),
                   reflection);
    }
  };
  print("none (unattacked; normal datagram)", normal, "-", false);
  for (std::size_t i = 0; i < attacks.size(); ++i) {
    print(attacks[i].name, results[i], attacks[i].bound, true);
  }
  print("none, again at the end", normalAgain, "-", false);
  if (csv != nullptr) std::fclose(csv);

  // Memory: the formula of docs/reliable-udp.md ("Memory bound") at the peak number of open
  // connections N, with the defaults' per-connection term (2 KB + 2 MiB / 64 + 8 KiB + 0.3 KB =
  // 42.3 KiB), the received-data term at its cap min(maxReceiveMemory, N x (receive window +
  // maxReceiveMemoryPerConnection)) x 1.5, no queued data (the application sends these
  // connections nothing) and the 8 MiB floors.
  const rudp::EndpointOptions defaults = rudp::ValidateOptions(rudp::EndpointOptions{});
  std::printf(
      "\n## Hostile peer over loopback sockets: server memory and tables under the memory and "
      "admission attacks\n\n");
  std::printf(
      "| Attack | Connections open (peak) | Receive memory held / kept (peak, KiB) | Process RSS "
      "growth (KiB) | Formula: state + floors (KiB) | Formula: + received data at its cap "
      "(MiB) | Slots (peak / end) | Handshake-expiry entries (peak) | Admission addresses |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (std::size_t i = 0; i < attacks.size(); ++i) {
    if (!attacks[i].memory) continue;
    const RunResult& r = results[i];
    const double n = static_cast<double>(r.peak.connectionsOpen);
    const double perConnection =
        2000 + static_cast<double>(defaults.receiveWindow) / 64 + 8192 + 300;
    const double floors = 8.0 * 1024 * 1024 + 2.0 * static_cast<double>(defaults.maxDatagramSize);
    const double state = n * perConnection + floors;
    const double received =
        1.5 * std::min(static_cast<double>(defaults.maxReceiveMemory),
                       n * static_cast<double>(defaults.receiveWindow +
                                               defaults.maxReceiveMemoryPerConnection));
    const double growth = r.peak.residentBytes > r.residentBefore
                              ? static_cast<double>(r.peak.residentBytes - r.residentBefore)
                              : 0;
    std::printf("| %s | %llu | %.0f / %.0f | %.0f | %.0f | %.0f | %llu / %llu | %llu | %llu |\n",
                attacks[i].name, static_cast<unsigned long long>(r.peak.connectionsOpen),
                static_cast<double>(r.peak.receiveMemoryInUse) / 1024,
                static_cast<double>(r.peak.receiveMemoryAllocated) / 1024, growth / 1024,
                state / 1024, (state + received) / (1024 * 1024),
                static_cast<unsigned long long>(r.peak.connectionSlots),
                static_cast<unsigned long long>(r.after.connectionSlots),
                static_cast<unsigned long long>(r.peak.handshakeExpiryEntries),
                static_cast<unsigned long long>(r.peak.admissionAddresses));
  }
  std::fflush(stdout);
}

}  // namespace timerwheel::perf
