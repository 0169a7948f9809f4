// ReliableUDP over real loopback sockets through the impairment relay (Relay/): loss,
// reordering, duplication and corruption done to real datagrams between real endpoints.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "Relay/ImpairmentRelay.h"
#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Support/MessageStream.h"

using namespace timerwheel;
using namespace timerwheel::test;
using rudp::Connection;
using rudp::Endpoint;
using Udp = boost::asio::ip::udp;

namespace {

const Udp::endpoint kLoopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);

// Server endpoint <- relay <- client endpoint, all on one io_context run by two threads.
class RelayedPair {
 public:
  RelayedPair(const relay::ImpairmentProfile& toServer, const relay::ImpairmentProfile& toClient,
              std::uint64_t seed, rudp::EndpointOptions options = {})
      : m_work(m_io.get_executor()) {
    rudp::EndpointOptions serverOptions = options;
    serverOptions.acceptIncoming = true;
    options.handshakeTimeout = 60'000;  // at 30 % loss a handshake may take a few tries
    server.emplace(m_io, kLoopback, serverOptions);
    relay.emplace(m_io, kLoopback, server->LocalEndpoint(), toServer, toClient, seed);
    client.emplace(m_io, kLoopback, options);
    for (int i = 0; i < 2; ++i) m_threads.emplace_back([this] { m_io.run(); });

    std::promise<std::shared_ptr<Connection>> accepted, connected;
    server->AsyncAccept([&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
      accepted.set_value(ec ? nullptr : std::move(c));
    });
    client->AsyncConnect(relay->LocalEndpoint(),
                         [&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                           connected.set_value(ec ? nullptr : std::move(c));
                         });
    auto connectedFuture = connected.get_future();
    auto acceptedFuture = accepted.get_future();
    if (connectedFuture.wait_for(std::chrono::seconds(90)) == std::future_status::ready &&
        acceptedFuture.wait_for(std::chrono::seconds(90)) == std::future_status::ready) {
      clientSide = connectedFuture.get();
      serverSide = acceptedFuture.get();
    }
  }

  ~RelayedPair() {
    clientSide.reset();
    serverSide.reset();
    client.reset();
    relay.reset();
    server.reset();
    m_work.reset();
    for (auto& thread : m_threads) thread.join();
  }

 private:
  boost::asio::io_context m_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> m_work;
  std::vector<std::thread> m_threads;

 public:
  std::optional<Endpoint> server;
  std::optional<relay::ImpairmentRelay> relay;
  std::optional<Endpoint> client;
  std::shared_ptr<Connection> clientSide;
  std::shared_ptr<Connection> serverSide;
};

bool WaitFor(const std::shared_ptr<MessageStream>& stream, std::chrono::seconds timeout) {
  stream->Start();
  return stream->WaitFinished(timeout);
}

}  // namespace

TEST_CASE(
    "through the relay every message arrives once in order and intact despite loss "
    "reordering duplication and corruption",
    "[rudp][relay]") {
  const double loss = GENERATE(0.01, 0.05, 0.10, 0.30);
  CAPTURE(loss);
  relay::ImpairmentProfile profile;
  profile.loss = loss;
  profile.delay = 2'000;
  profile.jitter = 1'000;
  profile.jitterReorders = true;
  profile.reorder = 0.05;
  profile.duplicate = 0.05;
  profile.corrupt = 0.02;
  RelayedPair pair(profile, profile, 1000 + static_cast<std::uint64_t>(loss * 100));
  REQUIRE(pair.clientSide);
  REQUIRE(pair.serverSide);

  const std::uint64_t count = loss >= 0.3 ? 60 : 150;
  auto sizeOf = [](std::uint64_t i) { return PatternSize(i, 25, 30'000); };
  auto up = std::make_shared<MessageStream>(pair.clientSide, pair.serverSide, count, sizeOf);
  auto down = std::make_shared<MessageStream>(pair.serverSide, pair.clientSide, count, sizeOf);
  down->Start();
  REQUIRE(WaitFor(up, std::chrono::seconds(240)));
  REQUIRE(down->WaitFinished(std::chrono::seconds(240)));
  CHECK(up->Error() == "");
  CHECK(down->Error() == "");
  CHECK(up->Received() == count);
  CHECK(down->Received() == count);

  const auto toServer = pair.relay->ToUpstreamCounters();
  const auto toClient = pair.relay->ToClientCounters();
  CHECK(toServer.droppedLoss + toClient.droppedLoss > 0);
  CHECK(toServer.duplicated + toClient.duplicated > 0);
  CHECK(toServer.corrupted + toClient.corrupted > 0);
  // Every corrupted datagram that arrived was caught by the checksum, none delivered.
  const auto serverStats = pair.server->GetStatistics();
  const auto clientStats = pair.client->GetStatistics();
  CHECK(serverStats.droppedBadChecksum + clientStats.droppedBadChecksum > 0);
  CHECK(pair.clientSide->GetStatistics().streamBytesRetransmitted > 0);
}

TEST_CASE("through the relay a link that fails one way ends both sides with TimedOut",
          "[rudp][relay][liveness]") {
  relay::ImpairmentProfile clean;
  clean.delay = 1'000;
  rudp::EndpointOptions options;
  options.idleTimeout = 1'500;
  options.keepaliveInterval = 500;
  RelayedPair pair(clean, clean, 7, options);
  REQUIRE(pair.clientSide);
  REQUIRE(pair.serverSide);
  auto stream = std::make_shared<MessageStream>(pair.clientSide, pair.serverSide, 20);
  REQUIRE(WaitFor(stream, std::chrono::seconds(60)));

  std::promise<boost::system::error_code> clientEnded, serverEnded;
  pair.clientSide->AsyncWaitClosed(
      [&](boost::system::error_code ec) { clientEnded.set_value(ec); });
  pair.serverSide->AsyncWaitClosed(
      [&](boost::system::error_code ec) { serverEnded.set_value(ec); });
  relay::ImpairmentProfile dead = clean;
  dead.loss = 1.0;
  pair.relay->SetProfiles(clean, dead);  // the server's datagrams no longer reach the client
  const auto failedAt = std::chrono::steady_clock::now();
  auto client = clientEnded.get_future();
  auto server = serverEnded.get_future();
  REQUIRE(client.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  REQUIRE(server.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  const auto elapsed = std::chrono::steady_clock::now() - failedAt;
  CHECK(client.get() == rudp::Error::TimedOut);
  CHECK(server.get() == rudp::Error::TimedOut);
  // The idle timeout (1.5 s, at least 3 PTOs) plus a PTO and scheduling slack under sanitizers.
  CHECK(elapsed < std::chrono::seconds(10));
}
