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

// The bound, in bytes requested from operator new per connection. The allocator adds its own
// overhead per block (glibc: 8 bytes, rounded up to 16), reported beside it.
constexpr std::int64_t kMaxBytesPerConnection = 1536;

// N connections from one client host to one server host, accepted as they come (each server side
// with an AsyncReceive pending, as a server that waits for requests has), then held idle: clients
// send keepalive PINGs, the server answers them. Whatever the server host allocates from the first
// handshake on is charged to `server`, the public Connection objects its accepts make included.
struct IdleServer {
  IdleServer(rudp::TimerQueueKind kind, std::size_t count, Microseconds idle)
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
    // What the test itself keeps per connection is reserved up front, outside the account.
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
        serverHost->Accept([this](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
          if (ec) return;
          c->AsyncReceive(messages[servers.size()], [](boost::system::error_code) {});
          servers.push_back(std::move(c));
        });
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      clientHost->Connect(serverHost->Address(),
                          [this](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
                            if (!ec) clients.push_back(std::move(c));
                          });
    }
    established = network.RunFor(
        30 * kSecond, [&] { return clients.size() == count && servers.size() == count; });
    network.RunFor(idle);
  }
  ~IdleServer() {
    network.onHostChange = nullptr;
    charge.reset();
  }
  IdleServer(const IdleServer&) = delete;
  IdleServer& operator=(const IdleServer&) = delete;

  HeapAccount serverHeap;
  std::optional<HeapAccount::Charge> charge;
  SimulatedNetwork network;
  SimulatedHost* serverHost = nullptr;
  SimulatedHost* clientHost = nullptr;
  std::vector<std::shared_ptr<rudp::Connection>> servers, clients;
  std::vector<std::vector<std::uint8_t>> messages;
  bool established = false;
};

}  // namespace

// The heap an idle server connection holds: its ConnectionCore and all it owns, the endpoint's
// table entries and the timer queue's records for it, the public Connection, and its pending
// receive. Measured after four keepalive rounds, so that what the first keepalives allocate (the
// sent-packet log, ACK ranges) is in, and the handshake bookkeeping has expired.
TEST_CASE("an idle server connection holds at most 1.5 KB of heap", "[rudp][sim][memory]") {
  const auto kind = GENERATE(rudp::TimerQueueKind::Wheel, rudp::TimerQueueKind::Heap);
  CAPTURE(kind == rudp::TimerQueueKind::Wheel ? "wheel" : "heap");
  constexpr std::size_t kConnections = 1000;
  IdleServer idle(kind, kConnections, 65 * kSecond);
  REQUIRE(idle.established);
  const auto stats = idle.serverHost->Statistics();
  CHECK(stats.connectionsOpen == kConnections);
  const std::int64_t bytes = idle.serverHeap.Bytes() / std::int64_t{kConnections};
  const std::int64_t blocks = idle.serverHeap.Blocks() / std::int64_t{kConnections};
  INFO("server heap per idle connection: " << bytes << " B requested in " << blocks
                                           << " blocks (about " << bytes + 16 * blocks
                                           << " B with glibc's per-block overhead)");
  CHECK(bytes <= kMaxBytesPerConnection);
  WARN("server heap per idle connection: " << bytes << " B in " << blocks << " blocks");
}
