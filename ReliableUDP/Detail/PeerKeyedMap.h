// Hash maps keyed by what remote peers send, hashed so that no peer can aim its keys at one bucket.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <unordered_map>

#include "ReliableUDP/Detail/SipHash.h"

namespace timerwheel::rudp::detail {

// The endpoint's hash maps are keyed by what peers choose: their address and port, the client ID of
// their handshake, the reset token they gave. With an unkeyed hash a peer picks keys that share one
// bucket, and every lookup then walks all of them: std::hash's identity on a 64-bit token, a
// handshake hash that left the address out, or FNV-1a over IPv6 addresses let 20,000-40,000 such
// entries cost 0.1-0.7 ms per datagram, and quadratic time to build and to tear down. So each map
// hashes its keys with SipHash-2-4 under a random key of its own, as the connection IDs and the
// retired handshakes are keyed: a peer that cannot see the key cannot aim at a bucket.
//
// A key type gives its bytes through HashBytes(key), found by argument-dependent lookup (a hidden
// friend) or declared here.
inline std::array<std::uint8_t, 8> HashBytes(std::uint64_t value) noexcept {
  std::array<std::uint8_t, 8> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::uint8_t>(value >> (8 * i));
  return bytes;
}

template <class Key>
class KeyedHash {
 public:
  // No default: a map without a key of its own would hash with a known one.
  explicit KeyedHash(const SipHashKey& key) noexcept : m_key(key) {}

  std::size_t operator()(const Key& key) const noexcept {
    const auto bytes = HashBytes(key);
    return static_cast<std::size_t>(SipHash24(m_key, bytes.data(), bytes.size()));
  }

 private:
  SipHashKey m_key;
};

template <class Key, class Value>
using PeerKeyedMap = std::unordered_map<Key, Value, KeyedHash<Key>>;

// A map under a fresh random key (RandomSipHashKey: throws if there is no random source).
template <class Key, class Value>
PeerKeyedMap<Key, Value> MakePeerKeyedMap() {
  return PeerKeyedMap<Key, Value>(0, KeyedHash<Key>(RandomSipHashKey()));
}

// An unordered_map never gives its buckets back by itself: rebuilt smaller (with its own hash and
// key) once it is four times emptier than its buckets, amortised O(1) per erase. Never throws, so
// that what erases (an ending connection, an open taken back) always finishes: a rebuild that
// cannot get its memory keeps the larger map, and a later erase tries again.
template <class Map>
void ShrinkMapIfSparse(Map& map) noexcept {
  if (map.bucket_count() <= 64 || map.size() * 4 >= map.bucket_count()) return;
  try {
    Map smaller(map.begin(), map.end(), 0, map.hash_function(), map.key_eq());
    map.swap(smaller);
  } catch (const std::bad_alloc&) {
    return;  // the larger map stays as it was
  }
}

}  // namespace timerwheel::rudp::detail
