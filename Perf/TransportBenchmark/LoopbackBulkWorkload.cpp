#include "TransportBenchmark/LoopbackBulkWorkload.h"

#include <sys/resource.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {
namespace {

using Udp = boost::asio::ip::udp;

constexpr std::size_t kMessageSize = 64 * 1024;
constexpr std::size_t kOutstandingSends = 16;
constexpr auto kTransferTimeout = std::chrono::seconds(120);

// An io_context on a thread of its own whose CPU time (getrusage RUSAGE_THREAD, user and
// system apart) can be read from that thread.
class EndThread {
 public:
  EndThread() : m_work(m_io.get_executor()), m_thread([this] { m_io.run(); }) {}
  ~EndThread() {
    m_work.reset();
    m_thread.join();
  }
  EndThread(const EndThread&) = delete;
  EndThread& operator=(const EndThread&) = delete;

  boost::asio::io_context& Io() { return m_io; }

  EndCpu Cpu() {
    std::promise<EndCpu> promise;
    boost::asio::post(m_io, [&promise] {
      rusage usage{};
      getrusage(RUSAGE_THREAD, &usage);
      promise.set_value({static_cast<double>(usage.ru_utime.tv_sec) +
                             static_cast<double>(usage.ru_utime.tv_usec) / 1e6,
                         static_cast<double>(usage.ru_stime.tv_sec) +
                             static_cast<double>(usage.ru_stime.tv_usec) / 1e6});
    });
    return promise.get_future().get();
  }

 private:
  boost::asio::io_context m_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> m_work;
  std::thread m_thread;
};

EndCpu operator-(const EndCpu& after, const EndCpu& before) {
  return {after.userSeconds - before.userSeconds, after.systemSeconds - before.systemSeconds};
}

// The two ends' state; every member is touched by its end's io thread only, until the transfer
// is over (the promises order the results before the benchmark thread reads them).
struct Transfer {
  std::uint64_t total = 0;
  std::vector<std::uint8_t> message = std::vector<std::uint8_t>(kMessageSize, 0x5A);
  std::shared_ptr<rudp::Connection> client;
  std::uint64_t queued = 0;  // bytes handed to AsyncSend
  std::shared_ptr<rudp::Connection> server;
  std::vector<std::uint8_t> received;
  std::uint64_t delivered = 0;
  std::promise<boost::system::error_code> connected;
  std::promise<void> done;

  void SendNext() {
    if (queued >= total) return;
    queued += message.size();
    client->AsyncSend(boost::asio::buffer(message), [this](boost::system::error_code error) {
      if (!error) SendNext();
    });
  }
  void ReceiveNext() {
    server->AsyncReceive(received, [this](boost::system::error_code error) {
      if (error) return;
      delivered += received.size();
      if (delivered >= total) {
        done.set_value();
        return;
      }
      ReceiveNext();
    });
  }
};

}  // namespace

LoopbackBulkRow RunLoopbackBulk(const std::string& configuration,
                                const rudp::EndpointOptions& options, std::uint64_t megabytes) {
  LoopbackBulkRow row;
  row.configuration = configuration;
  Transfer transfer;
  // Whole messages: round the total up to a multiple of the message size.
  transfer.total = (megabytes * 1'000'000 + kMessageSize - 1) / kMessageSize * kMessageSize;
  EndThread receiverThread;
  EndThread senderThread;
  rudp::EndpointOptions serverOptions = options;
  serverOptions.acceptIncoming = true;
  rudp::EndpointOptions clientOptions = options;
  clientOptions.acceptIncoming = false;
  const Udp::endpoint any(boost::asio::ip::address_v4::loopback(), 0);
  rudp::Endpoint server(receiverThread.Io(), any, serverOptions);
  rudp::Endpoint client(senderThread.Io(), any, clientOptions);
  server.AsyncAccept([&](boost::system::error_code error, std::shared_ptr<rudp::Connection> c) {
    if (error) return;
    transfer.server = std::move(c);
    transfer.ReceiveNext();
  });
  client.AsyncConnect(server.LocalEndpoint(),
                      [&](boost::system::error_code error, std::shared_ptr<rudp::Connection> c) {
                        transfer.client = std::move(c);
                        transfer.connected.set_value(error);
                      });
  if (const auto error = transfer.connected.get_future().get()) {
    throw std::runtime_error("loopback bulk: connect failed: " + error.message());
  }
  const rudp::EndpointStatistics clientBefore = client.GetStatistics();
  const rudp::EndpointStatistics serverBefore = server.GetStatistics();
  const EndCpu senderBefore = senderThread.Cpu();
  const EndCpu receiverBefore = receiverThread.Cpu();
  const auto start = Clock::now();
  boost::asio::post(senderThread.Io(), [&transfer] {
    for (std::size_t i = 0; i < kOutstandingSends; ++i) transfer.SendNext();
  });
  if (transfer.done.get_future().wait_for(kTransferTimeout) != std::future_status::ready) {
    throw std::runtime_error("loopback bulk: " + configuration + " did not finish within 120 s");
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  row.sender = senderThread.Cpu() - senderBefore;
  row.receiver = receiverThread.Cpu() - receiverBefore;
  const rudp::EndpointStatistics clientAfter = client.GetStatistics();
  const rudp::EndpointStatistics serverAfter = server.GetStatistics();
  const auto calls = [](const rudp::EndpointStatistics& s) {
    return s.sendSystemCalls + s.receiveSystemCalls;
  };
  row.senderSystemCalls = calls(clientAfter) - calls(clientBefore);
  row.receiverSystemCalls = calls(serverAfter) - calls(serverBefore);
  row.segmentedSends = clientAfter.segmentedSends - clientBefore.segmentedSends;
  row.coalescedReceives = serverAfter.coalescedReceives - serverBefore.coalescedReceives;
  row.megabytes = transfer.total / 1'000'000;
  row.goodputMBps = static_cast<double>(transfer.total) / 1e6 / elapsed;
  std::promise<rudp::ConnectionStatistics> statistics;
  boost::asio::post(senderThread.Io(),
                    [&] { statistics.set_value(transfer.client->GetStatistics()); });
  const rudp::ConnectionStatistics senderStatistics = statistics.get_future().get();
  row.datagramsSent = senderStatistics.packetsSent;
  row.retransmissions = senderStatistics.packetsRetransmitted;
  // Connections go before their endpoints, on their own threads' terms: Abort, then drop.
  boost::asio::post(senderThread.Io(), [&] { transfer.client.reset(); });
  boost::asio::post(receiverThread.Io(), [&] { transfer.server.reset(); });
  client.Close();
  server.Close();
  return row;
}

}  // namespace timerwheel::perf
