// How an endpoint's connections are split over shards (issue 18, Detail/Sharding.h): connection
// IDs name their shard, every packet of a connection reaches that shard, a handshake and its
// repeats reach one shard, handshakes spread over all of them, and each shard's share of the
// divided limits (a rate, a memory budget) adds up to at least the whole.
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <vector>

#include "ReliableUDP/Detail/Sharding.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/HandshakeDatagrams.h"

using namespace timerwheel;
using namespace timerwheel::test;
using namespace timerwheel::rudp::detail;

namespace {

Address Client(std::uint16_t port, std::uint8_t last = 1) {
  Address address;
  address.family = Address::Family::V4;
  address.bytes[0] = 10;
  address.bytes[3] = last;
  address.port = port;
  return address;
}

std::vector<std::uint8_t> DataDatagram(ConnectionId destination) {
  std::vector<std::uint8_t> datagram(64);
  PacketWriter writer(datagram.data(), datagram.size());
  writer.BeginData(destination, 1);
  datagram.resize(writer.Finish());
  return datagram;
}

}  // namespace

TEST_CASE("a shard's connection IDs are its index modulo the shard count, and never 0",
          "[rudp][sharding]") {
  const std::vector<ConnectionId> ids = {
      0, 1, 2, 63, 64, 65, 0x8000'0000'0000'0000u, UINT64_MAX - 1, UINT64_MAX};
  for (std::uint32_t shards : {1u, 2u, 3u, 7u, 64u}) {
    for (std::uint32_t index = 0; index < shards; ++index) {
      for (ConnectionId id : ids) {
        CAPTURE(shards, index, id);
        const ConnectionId moved = IdOfShard(id, index, shards);
        CHECK(moved != 0);
        CHECK(moved % shards == index);
        if (shards == 1 && id != 0) CHECK(moved == id);  // one shard: the IDs are left alone
      }
    }
  }
}

TEST_CASE("every packet addressed to a connection ID reaches the shard that owns the ID",
          "[rudp][sharding]") {
  const ShardSteering steering(4);
  for (ConnectionId id : {ConnectionId{4}, ConnectionId{5}, ConnectionId{0x1234'5678'9abc'def3}}) {
    const auto datagram = DataDatagram(id);
    CHECK(steering.ShardOf(Client(5000), datagram.data(), datagram.size()) == id % 4);
    // From anywhere: a packet from another address still goes to the owner, which drops it.
    CHECK(steering.ShardOf(Client(6000, 9), datagram.data(), datagram.size()) == id % 4);
  }
}

TEST_CASE("a handshake and its repeats reach one shard, and handshakes spread over all of them",
          "[rudp][sharding]") {
  constexpr std::size_t kShards = 4;
  const ShardSteering steering(kShards);
  std::vector<int> perShard(kShards);
  for (std::uint16_t port = 1000; port < 3000; ++port) {
    const ConnectionId clientId = 0x5151'0000u + port;
    const auto hello = HelloDatagram(clientId);
    const auto withCookie = HelloWithCookieDatagram(clientId, {});
    const std::size_t shard = steering.ShardOf(Client(port), hello.data(), hello.size());
    REQUIRE(shard < kShards);
    CHECK(steering.ShardOf(Client(port), withCookie.data(), withCookie.size()) == shard);
    ++perShard[shard];
  }
  // 2,000 handshakes over 4 shards: 500 each on average; a keyed hash keeps each near it.
  for (int count : perShard) CHECK(count > 350);
}

TEST_CASE("a Reset goes by its token, and what is too short to say goes to shard 0",
          "[rudp][sharding]") {
  const ShardSteering steering(3);
  std::vector<std::uint8_t> reset(kResetPacketSize);
  ResetToken token{};
  token[0] = 0xab;
  token[15] = 0xcd;
  PacketWriter writer(reset.data(), reset.size());
  writer.BeginReset(42, token);
  reset.resize(writer.Finish());
  CHECK(steering.ShardOf(Client(1), reset.data(), reset.size()) == ShardSteering::kByResetToken);
  ResetToken read{};
  REQUIRE(ShardSteering::ResetTokenOf(reset.data(), reset.size(), read));
  CHECK(read == token);
  const std::uint8_t tooShort[5] = {0x14, 0, 0, 0, 1};
  CHECK(steering.ShardOf(Client(1), tooShort, sizeof tooShort) == 0);
  CHECK_FALSE(ShardSteering::ResetTokenOf(tooShort, sizeof tooShort, read));
  // One shard: everything goes to it, Resets included.
  const ShardSteering alone(1);
  CHECK(alone.ShardOf(Client(1), reset.data(), reset.size()) == 0);
}

TEST_CASE("each shard enforces its share of the reply rate and the receive memory, rounded up",
          "[rudp][sharding]") {
  rudp::EndpointOptions whole = rudp::ValidateOptions({});
  whole.shards = 3;
  whole.maxConnections = 1000;
  whole.acceptBacklog = 10;
  whole.maxConnectionsPerAddress = 0;  // no limit stays no limit
  whole.maxConnectionsPerPrefix = 4096;
  whole.newConnectionsPerSecond = 10'000;
  whole.statelessRepliesPerSecond = 1;
  const rudp::EndpointOptions shard = OptionsOfShard(whole);
  // The connection limits are the whole's: the shards share one admission control.
  CHECK(shard.maxConnections == 1000);
  CHECK(shard.acceptBacklog == 10);
  CHECK(shard.maxConnectionsPerAddress == 0);
  CHECK(shard.maxConnectionsPerPrefix == 4096);
  CHECK(shard.newConnectionsPerSecond == 10'000);
  CHECK(shard.statelessRepliesPerSecond == 1);  // at least one each
  // The receive memory never below what one connection's window needs.
  CHECK(shard.maxReceiveMemory >= whole.receiveWindow + 2 * whole.maxDatagramSize);
  CHECK(shard.maxReceiveMemory * 3 >= whole.maxReceiveMemory);
  // Anything else is the whole's.
  CHECK(shard.keepaliveInterval == whole.keepaliveInterval);
  CHECK(shard.shards == 3);
  whole.shards = 1;
  CHECK(OptionsOfShard(whole).maxConnections == 1000);
}
