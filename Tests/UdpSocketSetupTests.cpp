// The socket set-up and receive-error back-off shared by ReliableUDP's Endpoint and the relay.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <chrono>

#include "UdpSocket/UdpSocketSetup.h"

using namespace timerwheel::udp;
using Udp = boost::asio::ip::udp;

TEST_CASE("ICMP error reports can be turned off on a bound UDP socket", "[udp]") {
  boost::asio::io_context io;
  Udp::socket socket(io, Udp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
  const IcmpReportsResult result = DisableIcmpErrorReports(socket);
  INFO(result.what << ": " << result.error.message());
  CHECK_FALSE(result.error);
}

TEST_CASE("a run of receive errors is re-armed at once, then with a growing delay", "[udp]") {
  boost::asio::io_context io;
  Udp::socket socket(io);
  ReceiveErrorBackoff backoff(socket.get_executor());
  int rearmed = 0;
  auto rearm = [&] { ++rearmed; };
  auto runReady = [&] {  // what is posted (the io_context stops whenever it runs out of work)
    io.restart();
    return io.poll();
  };

  for (unsigned i = 1; i <= ReceiveErrorBackoff::kImmediateRetries; ++i) {
    backoff.OnError(rearm);
    REQUIRE(rearmed == static_cast<int>(i) - 1);  // never inside OnError (its caller's lock)
    REQUIRE(runReady() == 1);                     // isolated errors: at once, no timer
    REQUIRE(rearmed == static_cast<int>(i));
  }
  SECTION("a persistent error waits for the timer") {
    backoff.OnError(rearm);
    CHECK(rearmed == static_cast<int>(ReceiveErrorBackoff::kImmediateRetries));
    io.restart();
    REQUIRE(io.run_one_for(std::chrono::seconds(10)) == 1);  // the delay's timer
    CHECK(rearmed == static_cast<int>(ReceiveErrorBackoff::kImmediateRetries) + 1);
    CHECK(backoff.ConsecutiveErrors() == ReceiveErrorBackoff::kImmediateRetries + 1);
  }
  SECTION("a datagram in between makes the next error isolated again") {
    backoff.OnReceived();
    backoff.OnError(rearm);
    CHECK(runReady() == 1);
    CHECK(rearmed == static_cast<int>(ReceiveErrorBackoff::kImmediateRetries) + 1);
  }
  SECTION("Cancel drops a delayed re-arm") {
    backoff.OnError(rearm);
    backoff.Cancel();
    io.restart();
    io.run_for(std::chrono::milliseconds(200));  // runs the cancelled wait's handler
    CHECK(rearmed == static_cast<int>(ReceiveErrorBackoff::kImmediateRetries));
  }
}
