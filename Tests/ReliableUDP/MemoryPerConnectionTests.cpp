// What an idle server connection costs in heap (issue 18: under 1.5 KB of the transport's own
// state per connection), counted on the simulated network with a HeapAccount charged only while
// the server host's code runs (Support/AllocationCounter.h).
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"
#include "Support/AllocationCounter.h"

using timerwheel::rudp::detail::Microseconds;
using timerwheel::test::HeapAccount;
using timerwheel::test::SimulatedHost;
using timerwheel::test::SimulatedNetwork;
namespace rudp = timerwheel::rudp;

namespace {

constexpr Microseconds kSecond = 1'000'000;

// Issue 18's bound on the transport's own state per idle server connection, in bytes requested
// from operator new. The allocator adds its own overhead per block (glibc: 8 bytes, rounded up to
// 16), reported beside it. MSVC's standard library makes larger hash-map nodes and buckets (the
// endpoint's tables) than libstdc++, which the test command runs with: an allowance for it.
#if defined(_MSC_VER)
constexpr std::int64_t kMaxBytesPerConnection = 1536 + 256;
#else
constexpr std::int64_t kMaxBytesPerConnection = 1536;
#endif
// What one pending AsyncReceive adds: its place in the queue of receives (the message pointer
// and the application's handler, held inline: Completion's 96 bytes).
constexpr std::int64_t kMaxBytesPerPendingReceive = 160;

// N connections from one client host to one server host, accepted as they come (each server side
// with an AsyncReceive pending if asked, as a server that waits for requests has), then held
// idle: clients send keepalive PINGs, the server answers them. Whatever the server host allocates
// from the first handshake on is charged to `serverHeap`, the public Connection objects its
// accepts make included; what the test keeps per connection is reserved up front, outside it.
struct IdleServer {
  IdleServer(rudp::TimerQueueKind kind, std::size_t count, bool pendingReceive, Microseconds idle)
      : network(17) {
    rudp::EndpointOptions serverOptions;
    serverOptions.acceptIncoming = true;
    serverOptions.timerQueue = kind;
    serverOptions.maxConnections = count + 10;
    rudp::EndpointOptions clientOptions;
    clientOptions.timerQueue = kind;
    clientOptions.maxConnections = count + 10;
    serverHost = &network.AddHost(9000, serverOptions);
    clientHost = &network.AddHost(9001, clientOptions);
    servers.reserve(count);
    clients.reserve(count);
    messages.resize(count);
    network.onHostChange = [this](const SimulatedHost* host) {
      charge.reset();
      if (host == serverHost) charge.emplace(&serverHeap);
    };
    {
      const HeapAccount::Charge asServer(&serverHeap);
      for (std::size_t i = 0; i < count; ++i) {
        serverHost->Accept([this, pendingReceive](boost::system::error_code ec,
                                                  std::shared_ptr<rudp::Connection> c) {
          if (ec) return;
          if (pendingReceive) {
            c->AsyncReceive(messages[servers.size()], [](boost::system::error_code) {});
          }
          servers.push_back(std::move(c));
        });
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      clientHost->Connect(serverHost->Address(), [this](boost::system::error_code ec,
                                                        std::shared_ptr<rudp::Connection> c) {
        if (!ec) clients.push_back(std::move(c));
      });
    }
    established = network.RunFor(
        30 * kSecond, [&] { return clients.size() == count && servers.size() == count; });
    // One message to one server connection, whose delayed ACK makes the server's timer queue
    // dispatch: its first dispatch reserves a batch entry for every timer it holds, as any
    // server's has once it has fired a timer. (An idle server may fire none for minutes, then
    // one: OnTimer's liveness PING. Counted here, not left to chance.)
    if (established) {
      clients.front()->AsyncSend(boost::asio::buffer(kOneByte), [](boost::system::error_code) {});
    }
    network.RunFor(idle);
  }
  ~IdleServer() {
    network.onHostChange = nullptr;
    charge.reset();
  }
  IdleServer(const IdleServer&) = delete;
  IdleServer& operator=(const IdleServer&) = delete;

  // Bytes and blocks the server holds per connection.
  std::int64_t Bytes() const { return serverHeap.Bytes() / std::int64_t(servers.size()); }
  std::int64_t Blocks() const { return serverHeap.Blocks() / std::int64_t(servers.size()); }

  static constexpr std::uint8_t kOneByte[1] = {0x42};
  HeapAccount serverHeap;
  std::optional<HeapAccount::Charge> charge;
  SimulatedNetwork network;
  SimulatedHost* serverHost = nullptr;
  SimulatedHost* clientHost = nullptr;
  std::vector<std::shared_ptr<rudp::Connection>> servers, clients;
  std::vector<std::vector<std::uint8_t>> messages;
  bool established = false;
};

constexpr std::size_t kConnections = 1000;
// Four keepalive rounds: what the first keepalives allocate (the sent-packet log, ACK ranges) is
// in, and the handshake bookkeeping (cookie replay entries) has expired.
constexpr Microseconds kIdle = 65 * kSecond;

}  // namespace

// The transport's own state per idle server connection (issue 18: under 1.5 KB): its
// ConnectionCore and all it owns, the endpoint's table entries and the timer queue's records for
// it, and the public Connection. At c9f0961 this was 3,177 B (wheel; 3,305 B with a pending
// receive): a Bbr controller, a four-record sent-packet log, the stream buffers and the
// handshake, close and encryption state of every connection, a third timer, and room for 33 ACK
// ranges at the first gap.
TEST_CASE("an idle server connection holds at most 1.5 KB of heap", "[rudp][sim][memory]") {
  const auto kind = GENERATE(rudp::TimerQueueKind::Wheel, rudp::TimerQueueKind::Heap);
  CAPTURE(kind == rudp::TimerQueueKind::Wheel ? "wheel" : "heap");
  IdleServer idle(kind, kConnections, /*pendingReceive*/ false, kIdle);
  REQUIRE(idle.established);
  CHECK(idle.serverHost->Statistics().connectionsOpen == kConnections);
  INFO("server heap per idle connection: " << idle.Bytes() << " B requested in " << idle.Blocks()
                                           << " blocks (about " << idle.Bytes() + 16 * idle.Blocks()
                                           << " B with glibc's per-block overhead)");
  CHECK(idle.Bytes() <= kMaxBytesPerConnection);
}

// The same after five hours idle. The client skips a packet number ever more rarely (the
// optimistic-ACK defence), so the server's set of received numbers gains a range per skip: about
// five in the first two hours, then one every four hours or so. When the set kept room for every
// range (33, 528 B) from the fifth, this was 1,602 B after two hours and 1,761 B after five; the
// server now gives that room back when a keepalive finds nothing in flight (1,297 B after twelve
// hours).
// 3.5 s in release, 18 s under ASan: [slow], for its longer ctest limit.
TEST_CASE("an idle server connection held for five hours holds at most 1.5 KB of heap",
          "[rudp][sim][memory][slow]") {
  constexpr Microseconds kHours = 5;
  IdleServer idle(rudp::TimerQueueKind::Wheel, kConnections, /*pendingReceive*/ false,
                  kHours * 3600 * kSecond);
  REQUIRE(idle.established);
  CHECK(idle.serverHost->Statistics().connectionsOpen == kConnections);
  INFO("server heap per connection after " << kHours << " hours idle: " << idle.Bytes()
                                           << " B requested in " << idle.Blocks() << " blocks");
  CHECK(idle.Bytes() <= kMaxBytesPerConnection);
}

// A server waiting for a request on each connection (as the benchmark's does) holds one pending
// receive more per connection, and nothing else.
TEST_CASE("a pending receive adds only its place in the queue of receives", "[rudp][sim][memory]") {
  IdleServer without(rudp::TimerQueueKind::Wheel, kConnections, /*pendingReceive*/ false, kIdle);
  IdleServer with(rudp::TimerQueueKind::Wheel, kConnections, /*pendingReceive*/ true, kIdle);
  REQUIRE(without.established);
  REQUIRE(with.established);
  INFO("per connection: " << without.Bytes() << " B idle, " << with.Bytes()
                          << " B with a receive pending");
  CHECK(with.Bytes() - without.Bytes() <= kMaxBytesPerPendingReceive);
  CHECK(with.Bytes() <= kMaxBytesPerConnection + kMaxBytesPerPendingReceive);
}

// The sent-packet log doubles to the packets a busy spell holds at once (88 bytes each) and keeps
// that room while the connection is busy, so that its datagram path allocates nothing; a quiet
// moment gives it back: the keepalive's expiry on the side that sends them, a keepalive PING
// finding nothing of its own in flight on the side that answers. Kept for good, a server that
// once sent a burst on each of 100,000 connections would hold that room on every one of them
// (2,048 records, 180 KB, after a 2 MiB window's worth).
TEST_CASE("a connection gives back the sent-packet log a burst grew at its next quiet moment",
          "[rudp][sim][memory]") {
  const bool serverSends = GENERATE(true, false);
  CAPTURE(serverSends);
  SimulatedNetwork network(23);
  rudp::EndpointOptions serverOptions;
  serverOptions.acceptIncoming = true;
  SimulatedHost& serverHost = network.AddHost(9000, serverOptions);
  SimulatedHost& clientHost = network.AddHost(9001, rudp::EndpointOptions{});
  std::shared_ptr<rudp::Connection> server, client;
  serverHost.Accept([&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
    if (!ec) server = std::move(c);
  });
  clientHost.Connect(serverHost.Address(),
                     [&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
                       if (!ec) client = std::move(c);
                     });
  REQUIRE(network.RunFor(10 * kSecond, [&] { return server && client; }));
  rudp::Connection& sender = serverSends ? *server : *client;
  rudp::Connection& receiver = serverSends ? *client : *server;

  // 200 messages of 1 KB at once: about as many packets in flight as the window lets out.
  constexpr std::size_t kMessages = 200;
  const std::vector<std::uint8_t> payload(1024, 0x5a);
  std::vector<std::vector<std::uint8_t>> received(kMessages);
  std::size_t sent = 0, arrived = 0;
  for (std::size_t i = 0; i < kMessages; ++i) {
    sender.AsyncSend(boost::asio::buffer(payload), [&](boost::system::error_code ec) {
      if (!ec) ++sent;
    });
    receiver.AsyncReceive(received[i], [&](boost::system::error_code ec) {
      if (!ec) ++arrived;
    });
  }
  REQUIRE(network.RunFor(10 * kSecond, [&] { return sent == kMessages && arrived == kMessages; }));
  const std::uint64_t busyRoom = sender.GetStatistics().sentPacketRecordRoom;
  INFO("sent-packet records held in room after the burst: " << busyRoom);
  CHECK(busyRoom >= 64);

  // Idle past a keepalive interval (15 s): each side's quiet moment has come at least once.
  network.RunFor(40 * kSecond);
  CHECK(sender.GetStatistics().sentPacketRecordRoom <= 2);
  CHECK(receiver.GetStatistics().sentPacketRecordRoom <= 2);
  CHECK(serverHost.Statistics().connectionsOpen == 1);
}
