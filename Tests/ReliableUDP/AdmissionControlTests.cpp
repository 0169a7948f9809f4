// Admission control (issue 14 item 3): per-address and per-prefix connection limits, a
// new-connection rate, and the explicit, stateless, bounded refusal that makes AsyncConnect fail
// with ServerBusy within one round trip. Deterministic: simulated network. The full-server refusal
// runs encrypted too.
#include <boost/asio/ip/address_v6.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "ReliableUDP/Error.h"
#include "ReliableUDP/Support/PeerPackets.h"
#include "ReliableUDP/Support/RawHandshake.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"

using namespace timerwheel;
using namespace timerwheel::test;
using namespace timerwheel::rudp::detail;
using Outcome = RawHandshake::Outcome;

namespace {

constexpr Microseconds kSecond = 1'000'000;

Udp::endpoint V4(std::uint32_t address, unsigned short port = 5000) {
  return {boost::asio::ip::address_v4(address), port};
}

Udp::endpoint V6(std::uint8_t byte6, std::uint8_t byte7, std::uint8_t last) {
  boost::asio::ip::address_v6::bytes_type bytes{};
  bytes[0] = 0x20;
  bytes[1] = 0x01;
  bytes[6] = byte6;
  bytes[7] = byte7;
  bytes[15] = last;
  return {boost::asio::ip::address_v6(bytes), 5000};
}

rudp::EndpointOptions Server() {
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  options.acceptBacklog = 100'000;
  return options;
}

}  // namespace

TEST_CASE("one address changing only its connection ID gets at most the per-address limit",
          "[rudp][sim][hostile][admission]") {
  SimulatedNetwork network(1411);
  auto options = Server();
  options.maxConnectionsPerAddress = 8;
  SimulatedHost& server = network.AddHost(9000, options);
  RawHandshake raw(network, server);
  // The attack: one address:port, a new client ID each time (186,691 handshakes in 48 s
  // before). Every handshake past the limit is refused, and holds nothing.
  int welcomed = 0, refused = 0;
  for (ConnectionId id = 1; id <= 1000; ++id) {
    const Outcome outcome = raw.Connect(V4(0x0A010101), id);
    welcomed += outcome == Outcome::Welcome;
    refused += outcome == Outcome::Refusal;
  }
  const auto stats = server.Statistics();
  CHECK(welcomed == 8);
  CHECK(stats.connectionsOpen == 8);
  CHECK(stats.connectionsRefused == 992);
  // Another address is not affected.
  CHECK(raw.Connect(V4(0x0A010102), 5000) == Outcome::Welcome);
  // Refusals are rate-limited (1000 per second by default, here all within one instant) and tiny.
  CHECK(refused == static_cast<int>(stats.refusalsSent));
  CHECK(stats.refusalsSent + stats.statelessRepliesSuppressed >= 992);
  CHECK(stats.bytesSent * 20 < stats.bytesReceived);
}

// The same limit against whole handshakes from one endpoint (keyed ones when encrypted: each costs
// the server an X25519 before it can be judged, so admission must come first).
TEMPLATE_TEST_CASE("one endpoint's flood of real handshakes gets at most the per-address limit",
                   "[rudp][sim][hostile][admission]", Plaintext, Encrypted) {
  SimulatedNetwork network(1415);
  auto options = Server();
  options.maxConnectionsPerAddress = 8;
  rudp::EndpointOptions clientOptions;
  TestType::Configure(options, clientOptions);
  SimulatedHost& server = network.AddHost(9000, options);
  SimulatedHost& client = network.AddHost(9001, clientOptions);
  std::vector<std::shared_ptr<rudp::Connection>> accepted, connected;
  int busy = 0, ended = 0;
  for (int i = 0; i < 40; ++i) {
    server.Accept([&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
      if (!ec) accepted.push_back(std::move(c));
    });
    client.Connect(server.Address(),
                   [&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
                     ++ended;
                     busy += ec == rudp::Error::ServerBusy;
                     if (!ec) connected.push_back(std::move(c));
                   });
  }
  REQUIRE(network.RunFor(30 * kSecond, [&] { return ended == 40; }));
  CHECK(connected.size() == 8);
  CHECK(busy == 32);
  CHECK(server.Statistics().connectionsOpen == 8);
  CHECK(server.Core().Tables().handshakes <= 8);
  REQUIRE_FALSE(accepted.empty());
  CHECK(accepted.front()->GetStatistics().encrypted == TestType::kEncrypted);
}

TEST_CASE("the per-prefix limit counts /24 for IPv4 and /56 for IPv6",
          "[rudp][sim][hostile][admission]") {
  SimulatedNetwork network(1412);
  auto options = Server();
  options.maxConnectionsPerAddress = 0;
  options.maxConnectionsPerPrefix = 4;
  SimulatedHost& server = network.AddHost(9000, options);
  RawHandshake raw(network, server);
  ConnectionId id = 1;
  for (std::uint32_t host = 1; host <= 4; ++host) {
    CHECK(raw.Connect(V4(0x0A010200 | host), id++) == Outcome::Welcome);  // 10.1.2.x
  }
  CHECK(raw.Connect(V4(0x0A0102FE), id++) == Outcome::Refusal);  // same /24
  CHECK(raw.Connect(V4(0x0A010301), id++) == Outcome::Welcome);  // 10.1.3.1: another /24

  for (std::uint8_t host = 1; host <= 4; ++host) {
    CHECK(raw.Connect(V6(0, 0x10, host), id++) == Outcome::Welcome);
  }
  CHECK(raw.Connect(V6(0, 0x11, 99), id++) == Outcome::Refusal);  // byte 7 differs: same /56
  CHECK(raw.Connect(V6(1, 0x10, 1), id++) == Outcome::Welcome);   // byte 6 differs: another
  CHECK(server.Statistics().connectionsOpen == 10);
}

TEST_CASE("the new-connection rate is limited and recovers", "[rudp][sim][hostile][admission]") {
  SimulatedNetwork network(1413);
  auto options = Server();
  options.newConnectionsPerSecond = 5;
  SimulatedHost& server = network.AddHost(9000, options);
  RawHandshake raw(network, server);
  int welcomed = 0;
  for (std::uint32_t host = 1; host <= 20; ++host) {
    welcomed += raw.Connect(V4(0x0A020000 | host), host) == Outcome::Welcome;
  }
  CHECK(welcomed == 5);
  network.RunFor(kSecond / 2);  // half a second: 2.5 more tokens
  welcomed = 0;
  for (std::uint32_t host = 21; host <= 40; ++host) {
    welcomed += raw.Connect(V4(0x0A020000 | host), host) == Outcome::Welcome;
  }
  CHECK(welcomed == 2);
}

TEMPLATE_TEST_CASE(
    "a full server refuses at once and AsyncConnect fails with ServerBusy in one round trip",
    "[rudp][sim][hostile][admission]", Plaintext, Encrypted) {
  SimulatedNetwork network(1414);
  auto options = Server();
  options.maxConnections = 2;
  rudp::EndpointOptions clientOptions;
  TestType::Configure(options, clientOptions);
  SimulatedHost& server = network.AddHost(9000, options);
  SimulatedHost& client = network.AddHost(9001, clientOptions);
  std::vector<std::shared_ptr<rudp::Connection>> accepted;
  for (int i = 0; i < 3; ++i) {
    server.Accept([&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
      if (!ec) accepted.push_back(c);
    });
  }
  int connected = 0;
  for (int i = 0; i < 2; ++i) {
    client.Connect(server.Address(), [&](boost::system::error_code ec,
                                         std::shared_ptr<rudp::Connection>) { connected += !ec; });
  }
  REQUIRE(network.RunFor(kSecond, [&] { return connected == 2; }));
  CHECK(accepted.at(0)->GetStatistics().encrypted == TestType::kEncrypted);

  boost::system::error_code result;
  bool done = false;
  const Microseconds start = network.Now();
  client.Connect(server.Address(),
                 [&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
                   result = ec;
                   done = true;
                   CHECK_FALSE(c);
                 });
  REQUIRE(network.RunFor(30 * kSecond, [&] { return done; }));
  CHECK(result == rudp::Error::ServerBusy);
  // One round trip: 10 ms each way on the default link (before: TimedOut after 10 s).
  CHECK(network.Now() - start <= 20'000);
  CHECK(client.Statistics().connectionsOpen == 2);
  CHECK(server.Statistics().connectionsRefused == 1);
}
