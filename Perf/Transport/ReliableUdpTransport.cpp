// ReliableUdpTransport: the benchmark's transport interface over rudp::Endpoint and Connection.
#include "Transport/ReliableUdpTransport.h"

#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "Transport/DeliveryTrackingTransport.h"
#include "Transport/IoThread.h"

namespace timerwheel::perf {
namespace {

using Udp = boost::asio::ip::udp;

// Enough sends in flight that the client's io thread always has the next message ready while the
// benchmark thread copies another, few enough that the buffers stay small (64 x 64 KB at most).
// The real back-pressure is the connection's own: an AsyncSend completes only once its message
// fits in the send buffer.
constexpr std::size_t kMaxOutstandingSends = 64;
constexpr auto kConnectTimeout = std::chrono::seconds(10);
// How long Stop waits for a graceful close (everything acknowledged) before aborting.
constexpr auto kCloseTimeout = std::chrono::seconds(5);

Udp::endpoint Loopback(std::uint16_t port) {
  return {boost::asio::ip::address_v4::loopback(), port};
}

class ReliableUdpTransport final : public DeliveryTrackingTransport {
 public:
  ReliableUdpTransport(rudp::EndpointOptions options, std::string name)
      : m_options(options), m_name(std::move(name)), m_buffers(kMaxOutstandingSends) {
    for (std::size_t i = 0; i < kMaxOutstandingSends; ++i) m_freeBuffers.push_back(i);
  }
  ~ReliableUdpTransport() override { Stop(); }
  ReliableUdpTransport(const ReliableUdpTransport&) = delete;
  ReliableUdpTransport& operator=(const ReliableUdpTransport&) = delete;

  std::string Name() const override { return m_name; }

  std::uint16_t StartServer(MessageHandler onMessage) override {
    m_onMessage = std::move(onMessage);
    m_serverIo = std::make_unique<IoThread>();
    rudp::EndpointOptions options = m_options;
    options.acceptIncoming = true;
    m_serverEndpoint = std::make_unique<rudp::Endpoint>(m_serverIo->Io(), Loopback(0), options);
    // Runs on the server's io thread; m_serverConnection is touched there only (and by Stop
    // after that thread has been joined).
    m_serverEndpoint->AsyncAccept(
        [this](boost::system::error_code ec, std::shared_ptr<rudp::Connection> connection) {
          if (ec) return;  // EndpointClosed: stopped before anyone connected
          m_serverConnection = std::move(connection);
          ReceiveNext();
        });
    return m_serverEndpoint->LocalEndpoint().port();
  }

  void Connect(std::uint16_t port) override {
    m_clientIo = std::make_unique<IoThread>();
    rudp::EndpointOptions options = m_options;
    options.acceptIncoming = false;  // a client-only endpoint answers no Hello
    m_clientEndpoint = std::make_unique<rudp::Endpoint>(m_clientIo->Io(), Loopback(0), options);
    using Result = std::pair<boost::system::error_code, std::shared_ptr<rudp::Connection>>;
    auto promise = std::make_shared<std::promise<Result>>();
    std::future<Result> future = promise->get_future();
    m_clientEndpoint->AsyncConnect(
        Loopback(port),
        [promise](boost::system::error_code ec, std::shared_ptr<rudp::Connection> connection) {
          promise->set_value({ec, std::move(connection)});
        });
    const bool timedOut = future.wait_for(kConnectTimeout) != std::future_status::ready;
    if (timedOut) {
      m_clientEndpoint->Close();  // fails the connect with EndpointClosed: its handler still runs
    }
    Result result = future.get();
    if (result.first) {
      throw std::runtime_error(m_name + ": cannot connect to 127.0.0.1:" + std::to_string(port) +
                               ": " +
                               (timedOut ? "no answer within 10 s" : result.first.message()));
    }
    m_clientConnection = std::move(result.second);
    // A connection that ends before Stop (the peer vanished, a protocol error) fails Send and
    // Flush at once instead of leaving them waiting for completions that will never come.
    m_clientConnection->AsyncWaitClosed([this](boost::system::error_code) {
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_clientClosed = true;
        if (!m_stopping) m_failed = true;
      }
      m_changed.notify_all();
    });
  }

  bool Send(const std::uint8_t* data, std::size_t size) override {
    std::size_t slot = 0;
    {
      std::unique_lock<std::mutex> lock(m_mutex);
      m_changed.wait(lock, [this] { return m_failed || !m_freeBuffers.empty(); });
      if (m_failed || !m_clientConnection) return false;
      slot = m_freeBuffers.back();
      m_freeBuffers.pop_back();
      ++m_messagesSent;
    }
    // The slot is ours until its handler hands it back under the mutex, which orders this write
    // before the io thread's read and the read before the slot's next write.
    std::vector<std::uint8_t>& buffer = m_buffers[slot];
    buffer.assign(data, data + size);
    m_clientConnection->AsyncSend(boost::asio::buffer(buffer),
                                  [this, slot](boost::system::error_code ec) {
                                    {
                                      std::lock_guard<std::mutex> lock(m_mutex);
                                      m_freeBuffers.push_back(slot);
                                      if (ec) m_failed = true;
                                    }
                                    m_changed.notify_all();
                                  });
    return true;
  }

  TransportCounters ClientCounters() override {
    if (m_stopped) return m_finalCounters;
    if (!m_clientConnection) return {};
    return FromStatistics(m_clientConnection->GetStatistics());
  }

  std::uint64_t LatestRttMicroseconds() override {
    // m_clientConnection is set by Connect and reset by Stop, both before and after any caller.
    return m_clientConnection ? m_clientConnection->GetStatistics().latestRttMicroseconds : 0;
  }

  void Stop() override {
    if (m_stopped) return;  // Stop and the destructor run on the benchmark's thread only
    m_stopped = true;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stopping = true;
    }
    if (m_clientConnection) {
      // Graceful first, so the server's receive loop ends with ClosedByPeer after the last
      // message rather than with whatever an abort would leave undelivered.
      m_clientConnection->Close();
      std::unique_lock<std::mutex> lock(m_mutex);
      if (!m_changed.wait_for(lock, kCloseTimeout, [this] { return m_clientClosed; })) {
        lock.unlock();
        m_clientConnection->Abort();
        lock.lock();
        m_changed.wait(lock, [this] { return m_clientClosed; });
      }
      m_finalCounters = FromStatistics(m_clientConnection->GetStatistics());
    }
    // Close before Finish: the endpoint's pending socket receive would otherwise keep the
    // io_context busy forever. Endpoints and connections go before their io_context.
    if (m_clientEndpoint) m_clientEndpoint->Close();
    if (m_clientIo) m_clientIo->Finish();
    m_clientConnection.reset();
    m_clientEndpoint.reset();
    m_clientIo.reset();
    if (m_serverEndpoint) m_serverEndpoint->Close();
    if (m_serverIo) m_serverIo->Finish();
    m_serverConnection.reset();
    m_serverEndpoint.reset();
    m_serverIo.reset();
  }

 private:
  static TransportCounters FromStatistics(const rudp::ConnectionStatistics& statistics) {
    TransportCounters counters;
    counters.wireBytesSent = statistics.bytesSent;
    counters.packetsSent = statistics.packetsSent;
    counters.retransmissions = statistics.packetsRetransmitted;
    counters.spuriousRetransmissions = static_cast<std::int64_t>(statistics.spuriousRetransmits);
    counters.minRttMicroseconds = statistics.minRttMicroseconds;
    counters.congestionState = rudp::DescribeCongestion(statistics);
    return counters;
  }

  // The server's receive loop, on its io thread. It ends with the connection (ClosedByPeer at
  // Stop, EndpointClosed if the server closes first).
  void ReceiveNext() {
    m_serverConnection->AsyncReceive(m_received, [this](boost::system::error_code ec) {
      if (ec) return;
      m_onMessage(m_received.data(), m_received.size());
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        ++m_messagesDelivered;
      }
      m_changed.notify_all();
      ReceiveNext();
    });
  }

  const rudp::EndpointOptions m_options;
  const std::string m_name;

  // Server side: after StartServer, touched on the server's io thread only.
  MessageHandler m_onMessage;
  std::unique_ptr<IoThread> m_serverIo;
  std::unique_ptr<rudp::Endpoint> m_serverEndpoint;
  std::shared_ptr<rudp::Connection> m_serverConnection;
  std::vector<std::uint8_t> m_received;

  // Client side: the pointers are set and reset on the benchmark's thread.
  std::unique_ptr<IoThread> m_clientIo;
  std::unique_ptr<rudp::Endpoint> m_clientEndpoint;
  std::shared_ptr<rudp::Connection> m_clientConnection;
  std::vector<std::vector<std::uint8_t>> m_buffers;  // one per outstanding send
  bool m_stopped = false;
  TransportCounters m_finalCounters;

  // Shared between the benchmark's thread and both io threads, under m_mutex; m_changed is also
  // notified when a slot is freed and when the client has ended.
  std::vector<std::size_t> m_freeBuffers;
  bool m_stopping = false;
  bool m_clientClosed = false;
};

}  // namespace

std::unique_ptr<ITransportUnderTest> MakeReliableUdpTransport(rudp::EndpointOptions options,
                                                              std::string name) {
  return std::make_unique<ReliableUdpTransport>(std::move(options), std::move(name));
}

}  // namespace timerwheel::perf
