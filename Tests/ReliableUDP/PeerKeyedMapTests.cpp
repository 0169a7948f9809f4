// PeerKeyedMap: keys that a peer chose to share one bucket under the hashes the endpoint used
// before (std::hash's identity on reset tokens, a handshake hash without the address, FNV-1a on
// addresses) spread over the buckets, and a shrink keeps the map's key.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/EndpointCore.h"
#include "ReliableUDP/Detail/PeerKeyedMap.h"

using timerwheel::rudp::detail::Address;
using timerwheel::rudp::detail::EndpointCore;
using timerwheel::rudp::detail::MakePeerKeyedMap;
using timerwheel::rudp::detail::ShrinkMapIfSparse;

namespace {

constexpr std::size_t kKeys = 4096;

template <class Map>
std::size_t LargestBucket(const Map& map) {
  std::size_t largest = 0;
  for (std::size_t bucket = 0; bucket < map.bucket_count(); ++bucket)
    largest = std::max(largest, map.bucket_size(bucket));
  return largest;
}

}  // namespace

// 4,096 keys over at least as many buckets: a keyed hash puts at most a handful in one bucket (16
// or more happens with a probability far below 1e-9); the old hashes put all of them in one.
TEST_CASE("reset tokens that are multiples of the bucket count spread over a PeerKeyedMap") {
  auto map = MakePeerKeyedMap<std::uint64_t, std::uint32_t>();
  map.reserve(kKeys);
  const std::uint64_t buckets = map.bucket_count();
  for (std::uint32_t i = 1; i <= kKeys; ++i) map.emplace(buckets * i, i);
  CHECK(LargestBucket(map) < 16);
}

TEST_CASE("handshakes from many addresses with one client ID and port spread over a PeerKeyedMap") {
  auto map = MakePeerKeyedMap<EndpointCore::HandshakeKey, std::uint32_t>();
  map.reserve(kKeys);
  for (std::uint32_t i = 0; i < kKeys; ++i) {
    EndpointCore::HandshakeKey key;
    key.remote.family = Address::Family::V6;
    key.remote.port = 4433;
    key.remote.bytes[0] = 0x20;
    key.remote.bytes[1] = 0x01;
    key.remote.bytes[6] = static_cast<std::uint8_t>(i >> 8);  // a /56 each
    key.remote.bytes[7] = static_cast<std::uint8_t>(i);
    key.clientId = 0x1234'5678'9abc'def0;
    map.emplace(key, i);
  }
  CHECK(LargestBucket(map) < 16);
}

TEST_CASE("two PeerKeyedMaps hash under different keys") {
  auto first = MakePeerKeyedMap<std::uint64_t, int>();
  auto second = MakePeerKeyedMap<std::uint64_t, int>();
  std::size_t same = 0;
  for (std::uint64_t value = 0; value < 64; ++value)
    same += first.hash_function()(value) == second.hash_function()(value) ? 1 : 0;
  CHECK(same == 0);
}

TEST_CASE("a PeerKeyedMap shrunk after a burst keeps its hash key and its entries") {
  auto map = MakePeerKeyedMap<std::uint64_t, std::uint64_t>();
  const auto hash = map.hash_function();
  for (std::uint64_t value = 0; value < 10'000; ++value) map.emplace(value, value * 3);
  for (std::uint64_t value = 10; value < 10'000; ++value) map.erase(value);
  const std::size_t before = map.bucket_count();
  ShrinkMapIfSparse(map);
  CHECK(map.bucket_count() < before / 4);
  for (std::uint64_t value = 0; value < 100; ++value)
    CHECK(map.hash_function()(value) == hash(value));
  REQUIRE(map.size() == 10);
  for (std::uint64_t value = 0; value < 10; ++value) CHECK(map.at(value) == value * 3);
}
