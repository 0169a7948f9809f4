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
// Not thread-safe (the endpoint's lock guards it).
class RetiredHandshakes {
 public:
  explicit RetiredHandshakes(std::size_t capacity) noexcept : m_capacity(capacity) {}

  // Remembers `handshake` until `expiresAt`. The caller checks Full() first.
  void Add(std::uint64_t handshake, Microseconds expiresAt);
  bool Contains(std::uint64_t handshake) const { return m_set.count(handshake) != 0; }
  bool Full() const noexcept { return m_set.size() >= m_capacity; }
  // Forgets the entries whose cookie no longer verifies at `now`; gives memory back after a
  // burst.
  void Expire(Microseconds now);
  std::size_t Size() const noexcept { return m_set.size(); }

 private:
  struct Entry {
    Microseconds expiresAt = 0;
    std::uint64_t handshake = 0;
    // Orders the min-heap: entries retire in any order, not in the order they expire.
    bool operator>(const Entry& other) const noexcept { return expiresAt > other.expiresAt; }
  };

  std::size_t m_capacity;
  std::unordered_set<std::uint64_t> m_set;
  std::vector<Entry> m_byExpiry;  // a min-heap on expiresAt
};

}  // namespace timerwheel::rudp::detail
