// ReliableUDP against peers that try to exhaust the server's memory (issue 14, items 2 and 4):
// scattered tiny STREAM frames, budgets per connection and per endpoint, memory given back after
// an attack. Each test asserts its bound with a counter. Deterministic: simulated network. The
// scattered-frames attack runs encrypted too, sealed with the connection's own keys.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/ChunkPool.h"
#include "ReliableUDP/Support/HostileHarness.h"
#include "ReliableUDP/Support/MessageStream.h"

using namespace timerwheel;
using namespace timerwheel::test;
using namespace timerwheel::rudp::detail;

namespace {

constexpr Microseconds kSecond = 1'000'000;
constexpr std::size_t kReceiveChunk = EndpointContext::kReceiveChunkSize;

// The datagram of issue 14 item 2: 256 one-byte STREAM frames 8 KiB apart (about 1.8 KB).
std::vector<std::pair<std::uint64_t, std::size_t>> ScatteredOneByteFrames() {
  std::vector<std::pair<std::uint64_t, std::size_t>> frames;
  for (std::uint64_t i = 0; i < 256; ++i) frames.emplace_back(1 + i * 8192, 1);
  return frames;
}

// The attack datagram (about 1.8 KB) is larger than the default maxDatagramSize, which is
// dropped before parsing (HostileCpuTests); a server configured for larger datagrams is the one
// it can reach.
rudp::EndpointOptions LargeDatagramOptions() {
  rudp::EndpointOptions options;
  options.maxDatagramSize = 2048;
  return options;
}

rudp::EndpointOptions Accepting() {
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  return options;
}

}  // namespace

TEMPLATE_TEST_CASE(
    "one-byte frames scattered over the window hold memory proportional to their bytes",
    "[rudp][sim][hostile][memory]", Plaintext, Encrypted) {
  SimulatedNetwork network(1401);
  auto serverOptions = LargeDatagramOptions();
  rudp::EndpointOptions clientOptions;
  TestType::Configure(serverOptions, clientOptions);
  HostileHarness h(network, serverOptions, 1, clientOptions);
  REQUIRE(h.serverSides.size() == 1);
  CHECK(h.serverSides.at(0)->GetStatistics().encrypted == TestType::kEncrypted);
  const ConnectionId id = h.ServerIds().at(0);
  h.SendStream(id, ScatteredOneByteFrames());
  const auto stats = h.server->Statistics();
  // 256 bytes held: one 1 KiB chunk each (before: a 16 KiB chunk per 16 KiB of window touched,
  // 128 chunks = 2 MiB for 256 bytes).
  CHECK(stats.receiveMemoryInUse == 256 * kReceiveChunk);
  CHECK(stats.receiveMemoryInUse <= 256 * 1024);
  CHECK(stats.droppedTooFragmented == 0);
}

TEST_CASE("a connection's out-of-order data beyond its budget is dropped unacknowledged",
          "[rudp][sim][hostile][memory]") {
  SimulatedNetwork network(1402);
  rudp::EndpointOptions options;
  options.maxReceiveMemoryPerConnection = 16 * 1024;
  HostileHarness h(network, options, 1);
  REQUIRE(h.serverSides.size() == 1);
  const ConnectionId id = h.ServerIds().at(0);
  std::vector<PacketNumber> numbers;
  for (std::uint64_t i = 0; i < 64; ++i) {  // 100 bytes, 4 KiB apart: a chunk each
    numbers.push_back(h.SendStream(id, {{100 + i * 4096, 100}}));
  }
  network.RunFor(kSecond);  // the server's delayed ACKs go out
  const auto stats = h.server->Statistics();
  CHECK(stats.receiveMemoryInUse <= options.maxReceiveMemoryPerConnection);
  CHECK(stats.droppedOverMemoryBudget == 64 - 16);
  // Stored data is acknowledged, dropped data is not: the peer sends it again later, nothing is
  // acknowledged and then lost.
  CHECK(h.ServerAcked(numbers.front()));
  CHECK(h.ServerAcked(numbers[15]));
  for (std::size_t i = 16; i < numbers.size(); ++i) CHECK_FALSE(h.ServerAcked(numbers[i]));

  SECTION("in-order data is never refused by the per-connection budget") {
    // The prefix [0, 100) and on: the window bounds it, and refusing it could stall a message.
    const PacketNumber inOrder = h.SendStream(id, {{0, 100}});
    network.RunFor(kSecond);
    CHECK(h.server->Statistics().droppedOverMemoryBudget == 64 - 16);
    CHECK(h.ServerAcked(inOrder));
  }
}

TEST_CASE("the endpoint-wide receive budget bounds every connection together",
          "[rudp][sim][hostile][memory]") {
  SimulatedNetwork network(1403);
  rudp::EndpointOptions options;
  options.maxMessageSize = 16 * 1024;
  options.receiveWindow = 64 * 1024;
  options.maxReceiveMemory = 128 * 1024;
  HostileHarness h(network, options, 8);
  REQUIRE(h.serverSides.size() == 8);
  const std::vector<ConnectionId> ids = h.ServerIds();
  // Out-of-order data (one byte per chunk, offset 0 never sent) from the first two connections:
  // 120 chunks wanted, and it may take only half the budget, 64 of them.
  for (std::size_t c = 0; c < 2; ++c) {
    for (std::uint64_t i = 0; i < 60; ++i) h.SendStream(ids[c], {{1 + i * 1024, 1}});
  }
  auto stats = h.server->Statistics();
  CHECK(stats.receiveMemoryInUse == options.maxReceiveMemory / 2);
  CHECK(stats.droppedOverMemoryBudget == 2 * 60 - 64);

  SECTION("out-of-order data never takes more than its half, whichever connection sends it") {
    for (std::size_t c = 2; c < ids.size(); ++c) {
      for (std::uint64_t i = 0; i < 60; ++i) h.SendStream(ids[c], {{1 + i * 1024, 1}});
    }
    stats = h.server->Statistics();
    CHECK(stats.receiveMemoryInUse == options.maxReceiveMemory / 2);
    CHECK(stats.droppedOverMemoryBudget == 8 * 60 - 64);
  }

  SECTION("in-order data takes the rest, and nothing beyond the whole budget") {
    // Nobody reads on the server, so in-order data stays: 6 x 11 chunks for the 64 left.
    for (std::size_t c = 2; c < ids.size(); ++c) {
      for (std::uint64_t i = 0; i < 11; ++i) h.SendStream(ids[c], {{i * 1024, 1024}});
    }
    stats = h.server->Statistics();
    CHECK(stats.receiveMemoryInUse == options.maxReceiveMemory);
    CHECK(stats.droppedOverMemoryBudget == 2 * 60 - 64 + 6 * 11 - 64);
  }
}

// Stored data is acknowledged and so can never be discarded: before out-of-order data had only
// half the budget, two connections that never sent offset 0 (and kept alive with PINGs) filled
// all of it for as long as they lived, and every other connection's in-order data was refused
// (the whole packet dropped, its ACKs too) until the connection timed out.
TEST_CASE(
    "out-of-order data pinned by hostile connections leaves room for other connections' in-order "
    "data",
    "[rudp][sim][hostile][memory]") {
  SimulatedNetwork network(4243);
  rudp::EndpointOptions options;
  options.maxMessageSize = 16 * 1024;
  options.receiveWindow = 64 * 1024;
  options.maxReceiveMemory = 128 * 1024;
  HostileHarness h(network, options, 2);
  REQUIRE(h.serverSides.size() == 2);
  for (const ConnectionId id : h.ServerIds()) {
    for (std::uint64_t i = 0; i < 64; ++i) h.SendStream(id, {{1 + i * 1024, 1}});
  }
  const auto attacked = h.server->Statistics();
  CHECK(attacked.receiveMemoryInUse == options.maxReceiveMemory / 2);
  CHECK(attacked.droppedOverMemoryBudget == 64);

  SimulatedHost& honest = network.AddHost(9005);
  std::shared_ptr<rudp::Connection> serverSide, clientSide;
  h.server->Accept([&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
    if (!ec) serverSide = std::move(c);
  });
  honest.Connect(h.server->Address(),
                 [&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
                   if (!ec) clientSide = std::move(c);
                 });
  network.RunFor(2 * kSecond, [&] { return serverSide && clientSide; });
  REQUIRE(serverSide);
  REQUIRE(clientSide);

  SECTION("one message") {
    const std::vector<std::uint8_t> payload(1000, 0x5A);
    clientSide->AsyncSend(boost::asio::buffer(payload), [](boost::system::error_code) {});
    std::vector<std::uint8_t> received;
    std::optional<boost::system::error_code> result;
    serverSide->AsyncReceive(received, [&](boost::system::error_code ec) { result = ec; });
    network.RunFor(20 * kSecond, [&] { return result.has_value(); });
    INFO("droppedOverMemoryBudget " << h.server->Statistics().droppedOverMemoryBudget);
    REQUIRE(result.has_value());
    CHECK(!*result);
    CHECK(received == payload);
  }

  SECTION("a stream of messages over a lossy link: each gap filled by a retransmission") {
    // Its out-of-order data is refused while the attack holds the share: the packets after a
    // loss go unacknowledged until the retransmission that fills the gap arrives in order. That
    // is slow, since the sender's probes carry new data first (refused as well) and the gap's
    // data goes again only after it: here 52 s for what takes 0.37 s unattacked, and at 5% loss
    // the client's side ended after 103 messages (seed 4243).
    LinkProfile lossy;
    lossy.loss = 0.01;
    network.SetLink(honest.Address(), h.server->Address(), lossy);
    network.SetLink(h.server->Address(), honest.Address(), lossy);
    auto stream = std::make_shared<MessageStream>(clientSide, serverSide, 200, [](std::uint64_t i) {
      return 1 + static_cast<std::size_t>((i * 7919) % 8000);  // within maxMessageSize
    });
    stream->Start();
    network.RunFor(120 * kSecond, [&] { return stream->Done(); });
    INFO("droppedOverMemoryBudget " << h.server->Statistics().droppedOverMemoryBudget);
    CHECK(stream->Error() == "");
    CHECK(stream->Received() == 200);
    CHECK(clientSide->GetStatistics().probeTimeouts > 0);  // the attack's cost: timeouts
  }
  CHECK(h.server->Statistics().receiveMemoryInUse >= options.maxReceiveMemory / 2);  // still held
}

TEST_CASE("receive memory pinned by an attack goes back once its connections end",
          "[rudp][sim][hostile][memory]") {
  SimulatedNetwork network(1404);
  HostileHarness h(network, LargeDatagramOptions(), 40);
  REQUIRE(h.serverSides.size() == 40);
  for (const ConnectionId id : h.ServerIds()) h.SendStream(id, ScatteredOneByteFrames());
  CHECK(h.server->Statistics().receiveMemoryInUse == 40 * 256 * kReceiveChunk);  // 10 MiB
  for (auto& connection : h.serverSides) connection->Abort();
  h.serverSides.clear();  // an ended connection's state lives as long as its handle
  network.RunFor(kSecond);
  const auto stats = h.server->Statistics();
  CHECK(stats.connectionsOpen == 0);
  CHECK(stats.receiveMemoryInUse == 0);
  // The pool keeps at most its floor (4 MiB) of free chunks; the rest went back to the system
  // (before: all 10 MiB stayed, and 315 MB in the measurement).
  CHECK(stats.receiveMemoryAllocated <= ChunkPool::kDefaultRetainedBytes);
}

TEST_CASE("ChunkPool keeps free chunks up to its high-water mark and frees the rest",
          "[rudp][buffers][memory]") {
  ChunkPool pool(1024, 4 * 1024);  // keeps at least 4 chunks, and half as many as are in use
  std::vector<std::uint8_t*> chunks;
  for (int i = 0; i < 100; ++i) chunks.push_back(pool.Acquire());
  CHECK(pool.ChunksAllocated() == 100);
  for (int i = 0; i < 90; ++i) {
    pool.Release(chunks.back());
    chunks.pop_back();
  }
  CHECK(pool.ChunksInUse() == 10);
  CHECK(pool.ChunksAllocated() == 15);  // at most half as many free as in use
  for (std::uint8_t* chunk : chunks) pool.Release(chunk);
  CHECK(pool.ChunksInUse() == 0);
  CHECK(pool.ChunksAllocated() == 4);  // the floor
  for (int i = 0; i < 4; ++i) chunks[static_cast<std::size_t>(i)] = pool.Acquire();
  CHECK(pool.ChunksAllocated() == 4);  // reused, nothing new
  for (int i = 0; i < 4; ++i) pool.Release(chunks[static_cast<std::size_t>(i)]);
}

TEST_CASE("handshake churn keeps the handshake-expiry list bounded by the live handshakes",
          "[rudp][sim][hostile][memory][tables]") {
  SimulatedNetwork network(1405);
  SimulatedHost& server = network.AddHost(9000, Accepting());
  SimulatedHost& client = network.AddHost(9001);
  // Handshake, then abort, 1500 times: at most one connection open at a time, 30 s of it, while
  // each expiry entry lives 21 s (two cookie windows and a second). Before, the list emptied
  // only when every entry had expired: it held every handshake of the last 21 s (420 measured
  // here; 2.0 M entries in the run) and kept its capacity after.
  std::size_t largest = 0;
  for (int i = 0; i < 1500; ++i) {
    std::shared_ptr<rudp::Connection> accepted, connected;
    server.Accept([&](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
      accepted = std::move(c);
    });
    client.Connect(server.Address(),
                   [&](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
                     connected = std::move(c);
                   });
    REQUIRE(network.RunFor(kSecond, [&] { return accepted && connected; }));
    connected->Abort();
    REQUIRE(network.RunFor(kSecond, [&] { return server.Statistics().connectionsOpen == 0; }));
    accepted.reset();
    largest = std::max(largest, server.Core().Tables().handshakeExpiries);
  }
  CHECK(largest <= 2 * 1 + 64);
  const auto tables = server.Core().Tables();
  CHECK(tables.handshakes == 0);
  CHECK(tables.slots <= 64);
}

// Issue 18: connections that end before the application accepts them stay in the accept queue
// until an accept passes them or a compaction drops them, so that ending one costs O(1) (before:
// a scan of the queue per retired connection and a vector erase per accept, quadratic at scale).
TEST_CASE("connections that end before an accept are never handed out, and the queue is bounded",
          "[rudp][sim][hostile][memory][tables]") {
  SimulatedNetwork network(1407);
  SimulatedHost& server = network.AddHost(9000, Accepting());
  SimulatedHost& client = network.AddHost(9001);
  std::vector<std::shared_ptr<rudp::Connection>> kept;
  std::size_t largest = 0;
  for (int i = 0; i < 300; ++i) {  // nobody accepts meanwhile
    std::shared_ptr<rudp::Connection> connected;
    client.Connect(server.Address(),
                   [&](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
                     connected = std::move(c);
                   });
    REQUIRE(network.RunFor(kSecond, [&] { return connected != nullptr; }));
    if (i % 30 == 0) {
      kept.push_back(connected);
      continue;
    }
    const auto open = server.Statistics().connectionsOpen;
    connected->Abort();
    REQUIRE(network.RunFor(kSecond, [&] { return server.Statistics().connectionsOpen < open; }));
    largest = std::max(largest, server.Core().Tables().acceptQueue);
  }
  REQUIRE(kept.size() == 10);
  CHECK(server.Statistics().connectionsOpen == kept.size());
  CHECK(largest <= 2 * kept.size() + 64 + 1);

  // The accepts get the ten that are still open, in the order they were established.
  std::vector<std::shared_ptr<rudp::Connection>> accepted;
  for (std::size_t i = 0; i <= kept.size(); ++i) {
    server.Accept([&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
      if (!ec) accepted.push_back(std::move(c));
    });
  }
  network.RunFor(kSecond / 10);
  REQUIRE(accepted.size() == kept.size());  // the eleventh accept waits
  CHECK(server.Core().Tables().acceptQueue == 0);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    auto stream = std::make_shared<MessageStream>(kept[i], accepted[i], 3);
    stream->Start();
    CHECK(network.RunFor(10 * kSecond, [&] { return stream->Done(); }));
    CHECK(stream->Received() == 3);
  }
}

TEST_CASE("every per-endpoint table shrinks back after a burst of connections",
          "[rudp][sim][hostile][memory][tables]") {
  SimulatedNetwork network(1406);
  HostileHarness h(network, {}, 1000);
  REQUIRE(h.serverSides.size() == 1000);
  const auto during = h.server->Core().Tables();
  CHECK(during.slots == 1000);
  CHECK(during.connectionIds == 1000);
  CHECK(during.handshakes == 1000);
  CHECK(during.resetTokens == 1000);
  CHECK(during.admissionAddresses == 1);
  for (auto& connection : h.clientSides) connection->Abort();
  h.clientSides.clear();
  h.serverSides.clear();
  network.RunFor(kSecond);
  REQUIRE(h.server->Statistics().connectionsOpen == 0);
  for (SimulatedHost* host : {h.server, h.client}) {
    const auto after = host->Core().Tables();
    // Before: the slot table and the hash maps' buckets kept their high-water mark.
    CHECK(after.slots <= 64);
    CHECK(after.connectionIds == 0);
    CHECK(after.connectionIdBuckets <= 64);
    CHECK(after.handshakes == 0);
    CHECK(after.handshakeExpiries <= 64);
    CHECK(after.resetTokens == 0);
    CHECK(after.admissionAddresses == 0);
    CHECK(after.admissionPrefixes == 0);
  }
}
