// The endpoint's map from a local connection ID to the slot of its connection: looked up for
// every datagram that arrives, so it is a flat open-addressing table rather than a node-based
// std::unordered_map. At a million idle connections the map's lookup drew 10-17 % of the server
// thread's profile samples (Perf/RESULTS.md, issue 18): its bucket, the node before the match and
// the node itself were each a cache miss, where a probe here reads one 16-byte entry, nearly
// always in one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// Linear probing over a power-of-two array, at most half full, with no tombstones: an erase
// shifts the entries after it back (so a lookup never walks over dead entries, however much
// churn there was). ID 0 marks an empty entry; it is never a connection's ID (0 means "none" on
// the wire).
//
// The IDs are the endpoint's own, drawn from a keyed PRF (ConnectionIdGenerator), so nobody can
// choose where they land; a datagram's ID only picks where a lookup starts, and with the table
// at most half full the runs it can walk are short whatever it picks. A table holds its
// connections' IDs in 16 bytes each at between a quarter and a half full (32-64 B a connection),
// against the map's 40-48.
//
// Not thread-safe (the endpoint's lock, or its shard, guards it).
class ConnectionIdTable {
 public:
  static constexpr std::uint32_t kNotFound = UINT32_MAX;

  // The slot of `id`, or kNotFound.
  std::uint32_t Find(ConnectionId id) const noexcept {
    if (m_entries.empty() || id == 0) return kNotFound;
    for (std::size_t index = HomeOf(id);; index = (index + 1) & m_mask) {
      const Entry& entry = m_entries[index];
      if (entry.id == id) return entry.slot;
      if (entry.id == 0) return kNotFound;
    }
  }
  bool Contains(ConnectionId id) const noexcept { return Find(id) != kNotFound; }

  // Adds `id` (not 0, not present) for `slot`. Grows the table when it would be more than half
  // full; if that allocation fails, throws and changes nothing.
  void Insert(ConnectionId id, std::uint32_t slot);
  // Takes `id` out, if present.
  void Erase(ConnectionId id) noexcept;
  // Gives memory back after churn: rebuilt smaller once at most an eighth full (amortised O(1)
  // per erase). Never throws: without the memory for the smaller table it keeps the larger one
  // (called as a connection ends, which must not fail for an optimisation).
  void ShrinkIfSparse() noexcept;

  std::size_t Size() const noexcept { return m_size; }
  std::size_t Capacity() const noexcept { return m_entries.size(); }

 private:
  struct Entry {
    ConnectionId id = 0;
    std::uint32_t slot = 0;
  };
  static constexpr std::size_t kMinimumCapacity = 16;

  // Fibonacci hashing: the ID's high product bits. The low bits of IDs in one shard are alike
  // (IdOfShard puts the shard's index there), so they cannot be the index.
  std::size_t HomeOf(ConnectionId id) const noexcept {
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ull) >> m_shift);
  }
  void Rebuild(std::size_t capacity);
  void Place(ConnectionId id, std::uint32_t slot) noexcept;

  std::vector<Entry> m_entries;
  std::size_t m_size = 0;
  std::size_t m_mask = 0;
  unsigned m_shift = 64;
};

}  // namespace timerwheel::rudp::detail
