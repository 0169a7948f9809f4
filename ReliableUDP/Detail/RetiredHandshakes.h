// The keyed handshakes whose connection has already ended while their cookie still verifies: a
// replay of one (an on-path observer resending the client's SecureHelloWithCookie from the
// client's address) would otherwise open a second connection in the client's name, with its
// client token, that the application accepts and that then idles out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// A set of 64-bit keyed hashes of (client address, client connection ID), each until the time
// its cookie stops verifying. Bounded by `capacity`: the endpoint sizes it so that its accept
// rate cannot fill it (each entry is a connection accepted within one cookie lifetime); if it is
// full anyway (no rate limit configured), the endpoint refuses keyed handshakes until entries
// expire rather than forget one, so a replay never gets through. About 56 bytes an entry.
//
// An entry is added as its connection ends, which must not fail (a connection half forgotten
// would hold its slot and its count for good), so its memory is taken earlier: Reserve, when the
// connection is accepted (where a failure refuses the handshake and changes nothing), makes room
// for one Add that cannot fail, and the room is held until that Add or Unreserve.
//
// Not thread-safe (the endpoint's lock guards it).
class RetiredHandshakes {
 public:
  explicit RetiredHandshakes(std::size_t capacity) noexcept : m_capacity(capacity) {}

  // Room for one more Add. On failure (bad_alloc) nothing changes.
  void Reserve();
  // Gives back a room that no Add will use (the handshake's cookie expired first, or its open
  // failed).
  void Unreserve() noexcept;
  // Remembers `handshake` until `expiresAt`, in a room Reserve made. The caller checks Full()
  // before it reserves.
  void Add(std::uint64_t handshake, Microseconds expiresAt) noexcept;
  bool Contains(std::uint64_t handshake) const { return m_set.count(handshake) != 0; }
  bool Full() const noexcept { return m_set.size() >= m_capacity; }
  // Forgets the entries whose cookie no longer verifies at `now`; gives memory back after a
  // burst (keeping the rooms reserved).
  void Expire(Microseconds now);
  std::size_t Size() const noexcept { return m_set.size(); }
  std::size_t Reserved() const noexcept { return m_spareNodes.size(); }

 private:
  struct Entry {
    Microseconds expiresAt = 0;
    std::uint64_t handshake = 0;
    // Orders the min-heap: entries retire in any order, not in the order they expire.
    bool operator>(const Entry& other) const noexcept { return expiresAt > other.expiresAt; }
  };

  using Set = std::unordered_set<std::uint64_t>;

  std::size_t m_capacity;
  // Holds no rehash and no node allocation for its reserved rooms: buckets for every entry and
  // room, and a node per room, taken out of the set itself (C++17 node handles).
  Set m_set;
  std::vector<Set::node_type> m_spareNodes;
  std::vector<Entry> m_byExpiry;  // a min-heap on expiresAt; capacity for every entry and room
};

}  // namespace timerwheel::rudp::detail
