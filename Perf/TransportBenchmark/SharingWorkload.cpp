// The sharing workload: one server endpoint, two client endpoints (each on its own io thread, so
// the flows do not queue behind each other in one process's event loop), one relay in front of
// the server. The benchmark's thread only samples the delivered-byte counters every 100 ms.
#include "TransportBenchmark/SharingWorkload.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/Endpoint.h"
#include "Transport/IoThread.h"
#include "TransportBenchmark/Measure.h"
#include "TransportBenchmark/Paths.h"

namespace timerwheel::perf {
namespace {

using Udp = boost::asio::ip::udp;

constexpr std::size_t kMessageSize = 1200;  // as in the bulk workload
// AsyncSends kept outstanding per flow: the connection's send buffer is the real back-pressure
// (a send completes once its message fits), this only keeps the next message ready.
constexpr int kOutstandingSends = 8;
constexpr auto kSampleInterval = std::chrono::milliseconds(100);
constexpr std::size_t kSamplesPerWindow = 10;  // the 1 s window of the convergence check
constexpr double kWithin = 0.8;                // "within 20 %": the smaller >= 0.8 x the larger

Udp::endpoint Loopback(std::uint16_t port) {
  return {boost::asio::ip::address_v4::loopback(), port};
}

const char* ControllerName(rudp::CongestionControl controller) {
  switch (controller) {
    case rudp::CongestionControl::Bbr:
      return "Bbr";
    case rudp::CongestionControl::NewReno:
      return "NewReno";
    case rudp::CongestionControl::None:
      return "none";
  }
  return "?";
}

// The server: accepts connections in order (flow 0 connects seconds before flow 1, so the
// accept order is the flow's index) and counts each one's delivered bytes.
class SharingServer {
 public:
  SharingServer() {
    rudp::EndpointOptions options;
    options.acceptIncoming = true;
    m_endpoint = std::make_unique<rudp::Endpoint>(m_io.Io(), Loopback(0), options);
    AcceptNext();
  }
  ~SharingServer() {
    m_endpoint->Close();
    m_io.Finish();
  }
  SharingServer(const SharingServer&) = delete;
  SharingServer& operator=(const SharingServer&) = delete;

  std::uint16_t Port() const { return m_endpoint->LocalEndpoint().port(); }
  std::uint64_t Delivered(std::size_t flow) const { return m_delivered[flow].load(); }

 private:
  struct Receiver {
    std::shared_ptr<rudp::Connection> connection;
    std::vector<std::uint8_t> message;
  };

  // On the server's io thread, as is everything touching m_receivers.
  void AcceptNext() {
    m_endpoint->AsyncAccept(
        [this](boost::system::error_code ec, std::shared_ptr<rudp::Connection> connection) {
          if (ec) return;  // EndpointClosed
          if (m_receivers.size() < m_delivered.size()) {
            m_receivers.push_back(std::make_unique<Receiver>());
            m_receivers.back()->connection = std::move(connection);
            ReceiveNext(m_receivers.size() - 1);
          }
          AcceptNext();
        });
  }

  void ReceiveNext(std::size_t flow) {
    Receiver& receiver = *m_receivers[flow];
    receiver.connection->AsyncReceive(receiver.message, [this, flow](boost::system::error_code ec) {
      if (ec) return;
      m_delivered[flow] += m_receivers[flow]->message.size();
      ReceiveNext(flow);
    });
  }

  IoThread m_io;
  std::unique_ptr<rudp::Endpoint> m_endpoint;
  std::vector<std::unique_ptr<Receiver>> m_receivers;
  std::array<std::atomic<std::uint64_t>, 2> m_delivered{};
};

// One sending client: connects when started and keeps kOutstandingSends messages queued until
// stopped.
class SharingClient {
 public:
  explicit SharingClient(rudp::CongestionControl controller) : m_message(kMessageSize, 0x5A) {
    rudp::EndpointOptions options;
    options.congestionControl = controller;
    m_endpoint = std::make_unique<rudp::Endpoint>(m_io.Io(), Loopback(0), options);
  }
  ~SharingClient() {
    m_stopping = true;
    m_endpoint->Close();
    m_io.Finish();
  }
  SharingClient(const SharingClient&) = delete;
  SharingClient& operator=(const SharingClient&) = delete;

  // Returns at once: the handshake and the sending run on the client's io thread.
  void Start(std::uint16_t port) {
    m_connection = m_connected.get_future();  // before the handler may set it
    m_endpoint->AsyncConnect(Loopback(port), [this](boost::system::error_code ec,
                                                    std::shared_ptr<rudp::Connection> connection) {
      if (ec) {
        m_connected.set_value(nullptr);
        return;
      }
      for (int i = 0; i < kOutstandingSends; ++i) SendNext(connection);
      m_connected.set_value(std::move(connection));
    });
  }

  // Stops queueing more and returns the connection's statistics (throws if it never connected).
  rudp::ConnectionStatistics Stop() {
    m_stopping = true;
    if (m_connection.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      throw std::runtime_error("sharing: a flow did not connect within 10 s");
    }
    const std::shared_ptr<rudp::Connection> connection = m_connection.get();
    if (!connection) throw std::runtime_error("sharing: a flow could not connect");
    return connection->GetStatistics();
  }

 private:
  // On the client's io thread. The message's bytes never change, so every outstanding send may
  // share them.
  void SendNext(const std::shared_ptr<rudp::Connection>& connection) {
    if (m_stopping) return;
    connection->AsyncSend(boost::asio::buffer(m_message),
                          [this, connection](boost::system::error_code ec) {
                            if (!ec) SendNext(connection);
                          });
  }

  const std::vector<std::uint8_t> m_message;
  std::atomic<bool> m_stopping{false};
  std::promise<std::shared_ptr<rudp::Connection>> m_connected;
  std::future<std::shared_ptr<rudp::Connection>> m_connection;  // the benchmark thread's end
  IoThread m_io;  // after what its handlers touch, so it is joined before they go
  std::unique_ptr<rudp::Endpoint> m_endpoint;
};

double Jain(double a, double b) {
  const double squares = a * a + b * b;
  return squares > 0 ? (a + b) * (a + b) / (2 * squares) : 0;
}

}  // namespace

SharingRow RunSharing(rudp::CongestionControl first, rudp::CongestionControl second,
                      std::size_t queueBytes, std::uint64_t seed, double secondStartsAt,
                      double seconds) {
  SharingRow row;
  row.seed = seed;
  row.secondStartsAt = secondStartsAt;
  row.seconds = seconds;
  row.path =
      "50 Mbit/s, " + (queueBytes % (1u << 20) == 0 ? std::to_string(queueBytes >> 20) + " MB"
                                                    : std::to_string(queueBytes >> 10) + " KB");
  row.flows[0].controller = ControllerName(first);
  row.flows[1].controller = ControllerName(second);

  relay::ImpairmentProfile capped = PathProfile(0);
  capped.rateBitsPerSecond = kSharingCapBytesPerSecond * 8;
  capped.queueLimitBytes = queueBytes;
  relay::ImpairmentProfile reverse = PathProfile(0);  // ACKs are not rate-limited

  SharingServer server;
  RelayThread relay(server.Port(), capped, reverse, seed);
  SharingClient clients[2] = {SharingClient(first), SharingClient(second)};

  // delivered[i][flow]: the bytes delivered by sample i (every kSampleInterval from the start).
  const auto samples = static_cast<std::size_t>(seconds * 1000 / 100);
  const auto secondStart = static_cast<std::size_t>(secondStartsAt * 1000 / 100);
  std::vector<std::array<std::uint64_t, 2>> delivered;
  delivered.reserve(samples + 1);
  relay::LinkCounters atSecondStart;
  const auto start = Clock::now();
  clients[0].Start(relay.Port());
  delivered.push_back({0, 0});
  for (std::size_t i = 1; i <= samples; ++i) {
    std::this_thread::sleep_until(start + i * kSampleInterval);
    delivered.push_back({server.Delivered(0), server.Delivered(1)});
    if (i == secondStart) {
      atSecondStart = relay.ToServer();
      clients[1].Start(relay.Port());
    }
  }
  const relay::LinkCounters atEnd = relay.ToServer();
  for (std::size_t flow = 0; flow < 2; ++flow) {
    const rudp::ConnectionStatistics statistics = clients[flow].Stop();
    row.flows[flow].retransmissions = statistics.packetsRetransmitted;
    row.flows[flow].congestionState = rudp::DescribeCongestion(statistics);
  }

  // Per second, and the means while both ran.
  const auto megabytesPerSecond = [&](std::size_t flow, std::size_t from, std::size_t to) {
    return static_cast<double>(delivered[to][flow] - delivered[from][flow]) / 1e6 /
           (static_cast<double>(to - from) * 0.1);
  };
  for (std::size_t flow = 0; flow < 2; ++flow) {
    for (std::size_t second = 0; second + kSamplesPerWindow <= samples;
         second += kSamplesPerWindow) {
      row.flows[flow].goodputMBps.push_back(
          megabytesPerSecond(flow, second, second + kSamplesPerWindow));
    }
    row.flows[flow].sharedMBps = megabytesPerSecond(flow, secondStart, samples);
  }
  row.jain = Jain(row.flows[0].sharedMBps, row.flows[1].sharedMBps);
  row.shareOfCap =
      (row.flows[0].sharedMBps + row.flows[1].sharedMBps) * 1e6 / kSharingCapBytesPerSecond;
  row.queueDrops = atEnd.droppedQueue - atSecondStart.droppedQueue;
  row.datagramsToServer = atEnd.in - atSecondStart.in;

  // Convergence: 1 s windows ending every 100 ms after the second flow's first full second.
  bool within = false;
  for (std::size_t end = secondStart + kSamplesPerWindow; end <= samples; ++end) {
    const double a = megabytesPerSecond(0, end - kSamplesPerWindow, end);
    const double b = megabytesPerSecond(1, end - kSamplesPerWindow, end);
    const bool close = std::min(a, b) >= kWithin * std::max(a, b);
    const double at = static_cast<double>(end - secondStart) * 0.1;
    if (close && row.firstWithinSeconds < 0) row.firstWithinSeconds = at;
    if (close && !within) row.convergedSeconds = at;
    if (!close) row.convergedSeconds = -1;
    within = close;
  }
  return row;
}

}  // namespace timerwheel::perf
