// Admission refusal and stateless reset over real UDP sockets on loopback (issue 14 items 3 and
// 9): the socket path of what the simulated tests show. Real time: each bound is stated with
// its tolerance, far below what it replaces (a 10 s handshake timeout, a 30 s idle timeout), so a
// busy machine cannot make it fail.
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Support/ConnectEndpoints.h"
#include "Support/IoThreads.h"

using namespace timerwheel;
using namespace timerwheel::test;
using rudp::Endpoint;
using Udp = boost::asio::ip::udp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kGenerous = std::chrono::seconds(60);
// Far below the timeouts these features replace (10 s handshake, 30 s idle), far above a round
// trip on loopback even on a loaded machine.
constexpr auto kWellWithin = std::chrono::seconds(3);

const Udp::endpoint kAnyLoopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);

}  // namespace

TEST_CASE("a server over its per-address limit refuses and AsyncConnect fails with ServerBusy",
          "[realtime][rudp][loopback][hostile][admission]") {
  IoThreads io(2);
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  options.maxConnectionsPerAddress = 1;
  Endpoint server(io.Io(), kAnyLoopback, options);
  Endpoint client(io.Io(), kAnyLoopback);
  auto sides = ConnectEndpoints(client, server, server.LocalEndpoint(), kGenerous);
  REQUIRE(sides.first);
  REQUIRE(sides.second);

  std::promise<boost::system::error_code> refused;
  const auto start = Clock::now();
  client.AsyncConnect(server.LocalEndpoint(),
                      [&](boost::system::error_code ec, std::shared_ptr<rudp::Connection>) {
                        refused.set_value(ec);
                      });
  auto result = refused.get_future();
  REQUIRE(result.wait_for(kGenerous) == std::future_status::ready);
  CHECK(result.get() == rudp::Error::ServerBusy);
  CHECK(Clock::now() - start < kWellWithin);
  CHECK(server.GetStatistics().refusalsSent == 1);
}

TEST_CASE("a server restarted on its port with its secret resets a live connection",
          "[realtime][rudp][loopback][hostile][reset]") {
  IoThreads io(2);
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  for (std::size_t i = 0; i < options.statelessResetKey.size(); ++i) {
    options.statelessResetKey[i] = static_cast<std::uint8_t>(0xA0 + i);
  }
  auto server = std::make_unique<Endpoint>(io.Io(), kAnyLoopback, options);
  const Udp::endpoint address = server->LocalEndpoint();
  Endpoint client(io.Io(), kAnyLoopback);
  auto sides = ConnectEndpoints(client, *server, address, kGenerous);
  REQUIRE(sides.first);
  REQUIRE(sides.second);

  // The server loses its state without a word: the connection object of its side is dropped
  // only after the endpoint (which would otherwise close it gracefully).
  server.reset();
  sides.second.reset();
  server = std::make_unique<Endpoint>(io.Io(), address, options);

  std::promise<boost::system::error_code> ended;
  std::vector<std::uint8_t> message(100, 7), incoming;
  const auto start = Clock::now();
  sides.first->AsyncReceive(incoming, [&](boost::system::error_code ec) { ended.set_value(ec); });
  sides.first->AsyncSend(boost::asio::buffer(message), [](boost::system::error_code) {});
  auto result = ended.get_future();
  REQUIRE(result.wait_for(kGenerous) == std::future_status::ready);
  CHECK(result.get() == rudp::Error::ConnectionReset);
  CHECK(Clock::now() - start < kWellWithin);
  CHECK(server->GetStatistics().statelessResetsSent >= 1);
  CHECK(client.GetStatistics().statelessResetsReceived == 1);
  sides.first.reset();
}
