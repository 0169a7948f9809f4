// Stateless reset (issue 14 item 9, RFC 9000 10.3): an endpoint that gets a packet for a
// connection it does not know answers with a Reset carrying that connection's token, smaller
// than the packet and rate-limited; the peer ends the connection at once with ConnectionReset.
// Deterministic: simulated network. A restarted server's reset runs encrypted too: the token
// travels in the sealed handshake, and the restarted server derives it from its secret as before.
#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "ReliableUDP/Detail/StatelessReset.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Error.h"
#include "ReliableUDP/Support/PeerPackets.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"

using namespace timerwheel;
using namespace timerwheel::test;
using namespace timerwheel::rudp::detail;

namespace {

constexpr Microseconds kSecond = 1'000'000;

ResetToken Secret(std::uint8_t seed) {
  ResetToken secret{};
  for (std::size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<std::uint8_t>(seed + i);
  return secret;
}

// A client connected to a server on port 9000; the server can be "restarted": shut down without
// a word to its peers (state lost), and a new one started on the same address.
struct Restartable {
  // configure: Plaintext::Configure or Encrypted::Configure.
  Restartable(SimulatedNetwork& network_, const ResetToken& secret,
              void (*configure)(rudp::EndpointOptions&,
                                rudp::EndpointOptions&) = Plaintext::Configure)
      : network(network_) {
    serverOptions.acceptIncoming = true;
    serverOptions.statelessResetKey = secret;
    rudp::EndpointOptions clientOptions;
    configure(serverOptions, clientOptions);
    server = &network.AddHost(9000, serverOptions);
    client = &network.AddHost(9001, clientOptions);
    server->Accept([this](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
      serverSide = std::move(c);
    });
    client->Connect(server->Address(),
                    [this](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
                      clientSide = std::move(c);
                    });
    network.RunFor(10 * kSecond, [this] { return clientSide && serverSide; });
  }

  void RestartServer(const ResetToken& secret) {
    server->Shutdown();  // ends its connections without sending anything: the state is lost
    serverSide.reset();  // (before Shutdown, dropping the handle would close gracefully)
    auto options = serverOptions;
    options.statelessResetKey = secret;
    server = &network.AddHost(9000, options);  // the old one ignores everything from now on
  }

  // Sends a message from the client and waits for the connection to end; returns its error.
  boost::system::error_code SendUntilEnded(Microseconds within) {
    ended = false;
    std::vector<std::uint8_t> message(100, 7);
    clientSide->AsyncSend(boost::asio::buffer(message), [](boost::system::error_code) {});
    auto received = std::make_shared<std::vector<std::uint8_t>>();
    clientSide->AsyncReceive(*received, [this, received](boost::system::error_code ec) {
      endError = ec;
      ended = true;
    });
    network.RunFor(within, [this] { return ended; });
    return endError;
  }

  SimulatedNetwork& network;
  rudp::EndpointOptions serverOptions;
  SimulatedHost* server = nullptr;
  SimulatedHost* client = nullptr;
  std::shared_ptr<rudp::Connection> clientSide, serverSide;
  bool ended = false;
  boost::system::error_code endError;
};

std::vector<std::uint8_t> DataPacket(ConnectionId destination, std::size_t frames) {
  std::vector<std::uint8_t> datagram(kMaxDatagramSize);
  PacketWriter writer(datagram.data(), datagram.size());
  writer.BeginData(destination, 7);
  for (std::size_t i = 0; i < frames; ++i) writer.AppendPing();
  datagram.resize(writer.Finish());
  return datagram;
}

}  // namespace

TEST_CASE("tokens derive from the secret and the connection ID", "[rudp][reset]") {
  const StatelessResetTokens a(Secret(1)), sameSecret(Secret(1)), other(Secret(2));
  CHECK(a.For(42) == sameSecret.For(42));  // a restarted endpoint given its secret agrees
  CHECK(a.For(42) != a.For(43));
  CHECK(a.For(42) != other.For(42));
  CHECK_FALSE(IsNullResetToken(a.For(42)));
  const StatelessResetTokens random1(ResetToken{}), random2(ResetToken{});  // all zero: random
  CHECK(random1.For(42) != random2.For(42));
}

TEMPLATE_TEST_CASE("a server restarted with its secret resets a client's connection at once",
                   "[rudp][sim][hostile][reset]", Plaintext, Encrypted) {
  SimulatedNetwork network(1421);
  Restartable r(network, Secret(9), TestType::Configure);
  REQUIRE(r.clientSide);
  CHECK(r.clientSide->GetStatistics().encrypted == TestType::kEncrypted);
  r.RestartServer(Secret(9));
  const Microseconds start = network.Now();
  const auto error = r.SendUntilEnded(60 * kSecond);
  CHECK(r.ended);
  CHECK(error == rudp::Error::ConnectionReset);
  // One round trip (10 ms each way), not the 30 s idle timeout the client waited before.
  CHECK(network.Now() - start <= 25'000);
  CHECK(r.server->Statistics().statelessResetsSent >= 1);
  CHECK(r.client->Statistics().statelessResetsReceived == 1);
  CHECK(r.client->Statistics().connectionsOpen == 0);
}

TEST_CASE("a Reset with the wrong token ends nothing", "[rudp][sim][hostile][reset]") {
  SimulatedNetwork network(1422);
  Restartable r(network, Secret(9));
  REQUIRE(r.clientSide);
  SECTION("a server restarted with another secret cannot reset") {
    r.RestartServer(Secret(10));
    r.SendUntilEnded(5 * kSecond);
    CHECK_FALSE(r.ended);  // only the idle timeout will end it
    CHECK(r.server->Statistics().statelessResetsSent >= 1);
    CHECK(r.client->Statistics().statelessResetsReceived == 0);
  }
  SECTION("an off-path attacker guessing tokens from the server's address cannot reset") {
    std::mt19937_64 random(3);
    std::vector<std::uint8_t> reset(kResetPacketSize);
    for (int i = 0; i < 10'000; ++i) {
      ResetToken guess{};
      for (auto& byte : guess) byte = static_cast<std::uint8_t>(random());
      PacketWriter writer(reset.data(), reset.size());
      writer.BeginReset(random(), guess);
      reset.resize(writer.Finish());
      r.client->Deliver(r.server->Address(), reset);
    }
    network.RunFor(kSecond);
    CHECK(r.client->Statistics().statelessResetsReceived == 0);
    CHECK(r.client->Statistics().connectionsOpen == 1);
  }
}

TEST_CASE("a client restarted with its secret resets the server's connection",
          "[rudp][sim][hostile][reset]") {
  SimulatedNetwork network(1423);
  rudp::EndpointOptions clientOptions;
  clientOptions.statelessResetKey = Secret(33);
  rudp::EndpointOptions serverOptions;
  serverOptions.acceptIncoming = true;
  SimulatedHost& server = network.AddHost(9000, serverOptions);
  SimulatedHost* client = &network.AddHost(9001, clientOptions);
  std::shared_ptr<rudp::Connection> serverSide, clientSide;
  server.Accept([&](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
    serverSide = std::move(c);
  });
  client->Connect(server.Address(), [&](boost::system::error_code,
                                        std::shared_ptr<rudp::Connection> c) { clientSide = c; });
  REQUIRE(network.RunFor(10 * kSecond, [&] { return serverSide && clientSide; }));
  client->Shutdown();  // the state is lost, the peer told nothing
  clientSide.reset();
  client = &network.AddHost(9001, clientOptions);
  bool ended = false;
  boost::system::error_code error;
  std::vector<std::uint8_t> message(100, 7), received;
  serverSide->AsyncSend(boost::asio::buffer(message), [](boost::system::error_code) {});
  serverSide->AsyncReceive(received, [&](boost::system::error_code ec) {
    error = ec;
    ended = true;
  });
  REQUIRE(network.RunFor(5 * kSecond, [&] { return ended; }));
  CHECK(error == rudp::Error::ConnectionReset);
  CHECK(server.Statistics().connectionsOpen == 0);
}

TEST_CASE("resets are smaller than what they answer and rate-limited",
          "[rudp][sim][hostile][reset]") {
  SimulatedNetwork network(1424);
  rudp::EndpointOptions options;
  options.statelessRepliesPerSecond = 50;
  SimulatedHost& endpoint = network.AddHost(9000, options);
  std::uint64_t largestReply = 0;
  network.tap = [&](const Udp::endpoint&, const Udp::endpoint&,
                    const std::vector<std::uint8_t>& datagram) {
    largestReply = std::max<std::uint64_t>(largestReply, datagram.size());
  };
  const Udp::endpoint attacker(boost::asio::ip::make_address_v4("10.9.9.9"), 4000);
  // Too small to be answered by a smaller Reset: never answered.
  for (ConnectionId id = 1; id <= 100; ++id) endpoint.Deliver(attacker, DataPacket(id, 1));
  CHECK(endpoint.Statistics().statelessResetsSent == 0);
  // Large enough: answered, at most 50 per second.
  for (ConnectionId id = 1; id <= 1000; ++id) endpoint.Deliver(attacker, DataPacket(id, 40));
  CHECK(endpoint.Statistics().statelessResetsSent == 50);
  network.RunFor(kSecond);
  for (ConnectionId id = 1; id <= 1000; ++id) endpoint.Deliver(attacker, DataPacket(id, 40));
  const auto stats = endpoint.Statistics();
  CHECK(stats.statelessResetsSent == 100);
  CHECK(largestReply == kResetPacketSize);
  CHECK(stats.bytesSent * 20 < stats.bytesReceived);
  network.tap = nullptr;
}
