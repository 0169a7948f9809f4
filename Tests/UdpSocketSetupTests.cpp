// The socket set-up and receive-error back-off shared by ReliableUDP's Endpoint and the relay.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "UdpSocket/UdpSocketSetup.h"

using namespace timerwheel::udp;
namespace rudp = timerwheel::rudp;
using Udp = boost::asio::ip::udp;

namespace {

const Udp::endpoint kAnyLoopback(boost::asio::ip::address_v4::loopback(), 0);

#ifdef __linux__
// A figure from /proc (a sysctl, or a field of this process's status line), or -1.
long long ReadProcNumber(const char* path) {
  std::ifstream file(path);
  long long value = -1;
  file >> value;
  return file ? value : -1;
}

// Whether this process may exceed net.core.rmem_max: CAP_NET_ADMIN (bit 12 of CapEff) in the
// initial user namespace, where the kernel checks it (a container's own namespace may grant the
// bit without the power: its uid map is not the identity over all 2^32 ids).
bool HasNetAdmin() {
  std::ifstream map("/proc/self/uid_map");
  unsigned long long inside = 1, outside = 1, count = 0;
  if (!(map >> inside >> outside >> count) || inside != 0 || outside != 0 ||
      count != 4294967295ULL) {
    return false;
  }
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> 12) & 1;
  }
  return false;
}
#endif

// Sends `count` datagrams of `size` bytes to `to` from a socket of its own. On loopback each
// is in the receiver's buffer, or dropped, when send_to returns.
void SendDatagrams(boost::asio::io_context& io, const Udp::endpoint& to, int count,
                   std::size_t size) {
  Udp::socket sender(io, kAnyLoopback);
  const std::vector<std::uint8_t> bytes(size, 0x5a);
  for (int i = 0; i < count; ++i) sender.send_to(boost::asio::buffer(bytes), to);
}

}  // namespace

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

TEST_CASE("socket buffers are granted as asked, and over the OS's cap never fail", "[udp]") {
  boost::asio::io_context io;
  Udp::socket socket(io, kAnyLoopback);
  const SocketBufferSizes small = SetSocketBufferSizes(socket, 96 << 10, 80 << 10);
#ifdef __linux__
  CHECK(small.receive == 96 << 10);  // under any cap: granted
  CHECK(small.send == 80 << 10);
  const long long cap = ReadProcNumber("/proc/sys/net/core/rmem_max");
  REQUIRE(cap > 0);
  if (cap > (1 << 28)) return;  // a cap this high: nothing to go beyond
  const int over = static_cast<int>(cap) + (1 << 20);
  const SocketBufferSizes large = SetSocketBufferSizes(socket, over, 80 << 10);
  // With CAP_NET_ADMIN the cap does not apply (SO_RCVBUFFORCE); without it, the cap is granted.
  CAPTURE(cap, HasNetAdmin());
  if (HasNetAdmin()) {
    CHECK(large.receive == over);
  } else {  // capped, or (a namespace we cannot see through) forced: never less, never an error
    CHECK((large.receive == cap || large.receive == over));
  }
#else
  CHECK(small.receive >= 96 << 10);
  CHECK(small.send >= 80 << 10);
#endif
}

TEST_CASE("datagrams a full receive buffer drops are counted", "[udp]") {
  boost::asio::io_context io;
  Udp::socket receiver(io, kAnyLoopback);
  SetSocketBufferSizes(receiver, 4096, 4096);  // the OS's smallest: a few datagrams
  const int sent = 200;
  SendDatagrams(io, receiver.local_endpoint(), sent, 1000);
  int received = 0;
  receiver.non_blocking(true);
  std::vector<std::uint8_t> buffer(2000);
  boost::system::error_code error;
  Udp::endpoint from;
  while (receiver.receive_from(boost::asio::buffer(buffer), from, 0, error) > 0 && !error) {
    ++received;
  }
#ifdef __linux__
  CHECK(received > 0);
  CHECK(ReceiveBufferDrops(receiver) == static_cast<std::uint64_t>(sent - received));
#else
  CHECK(ReceiveBufferDrops(receiver) == 0);  // not reported
#endif
}

TEST_CASE("an endpoint reports its socket buffers and the datagrams its full socket dropped",
          "[udp][rudp]") {
  boost::asio::io_context io;  // not run: nothing reads the socket
  rudp::EndpointOptions options;
  options.socketReceiveBufferSize = 4096;
  rudp::Endpoint endpoint(io, kAnyLoopback, options);
  SendDatagrams(io, endpoint.LocalEndpoint(), 200, 1000);
  const rudp::EndpointStatistics before = endpoint.GetStatistics();
  CHECK(before.socketReceiveBufferBytes >= 4096);
  CHECK(before.socketSendBufferBytes > 0);
#ifdef __linux__
  CHECK(before.droppedSocketBufferFull > 100);
#endif
  endpoint.Close();
  // The count outlives the socket.
  CHECK(endpoint.GetStatistics().droppedSocketBufferFull == before.droppedSocketBufferFull);

  rudp::EndpointOptions invalid;
  invalid.socketReceiveBufferSize = 0;
  CHECK_THROWS_AS(rudp::Endpoint(io, kAnyLoopback, invalid), std::invalid_argument);
}
