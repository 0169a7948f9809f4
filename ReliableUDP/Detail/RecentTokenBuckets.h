// Token buckets for many sources (the addresses, or the prefixes, that each get a share of a
// budget), holding the sources that took a token within the last second (and stale ones until a
// take or ForgetStale gets to them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/PeerKeyedMap.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/TokenBucket.h"

namespace timerwheel::rudp::detail {

// One TokenBucket per source, each of `perSecond` tokens a second (a one-second burst). A
// bucket is full again at most a second after its last take, and a full bucket decides exactly
// as no bucket at all: so only sources that took a token within the last second need an entry,
// and an entry whose bucket is full again is stale and may go at no loss. Sources are named by
// the caller's 64-bit keyed hash (a collision, 2^-64 a pair, only makes two sources share one
// bucket), found through a PeerKeyedMap, and kept in the order of their last take.
//
// Bound: at most `capacity` entries, about 90 bytes each (the entry, 48, the map's node, 32,
// and its bucket), at most 144 with the vector's and the buckets' room for growth. The caller
// guarantees that fewer than `capacity` takes happen within any second (each of its takes also
// takes a token of an endpoint-wide bucket, which allows at most twice its rate a second). Then,
// whenever the table is full, its least recently used entry last took a token over a second ago and
// is stale: a new source takes its place and nothing that still counts is forgotten, so no peer,
// however many sources it speaks for, can push out a source that is spending its share (an honest
// one's included). Should the guarantee fail anyway, a new source is refused rather than a counting
// entry forgotten.
//
// Stale entries go a few at a time (kForgetPerCall, oldest first) at each take and each
// ForgetStale, and the memory after a burst goes back with them: CPU stays O(1) per call (the
// map's and the vector's rebuilds after a burst are amortised O(1) per entry).
//
// Not thread-safe (the endpoint's lock guards it).
class RecentTokenBuckets {
 public:
  static constexpr std::size_t kForgetPerCall = 8;
  // The largest capacity (entries are indexed by 32 bits).
  static constexpr std::size_t kMaxCapacity = 0xFFFF'FFFE;

  // perSecond >= 1, capacity in [1, kMaxCapacity]. Throws std::runtime_error if there is no
  // random source (the map's hash key).
  RecentTokenBuckets(std::uint64_t perSecond, std::size_t capacity);

  // Whether `source` has a token now (one without an entry has a full bucket). Takes nothing.
  bool HasToken(std::uint64_t source, Microseconds now);
  // Takes one of `source`'s tokens, making its entry if it has none. False, and nothing taken,
  // if it has no token, or if it has no entry and the table is full of entries that still count
  // (the caller's guarantee failed). If making the entry throws std::bad_alloc, nothing that
  // counts has changed.
  bool Take(std::uint64_t source, Microseconds now);
  // Forgets up to kForgetPerCall stale entries, oldest first, and gives memory back after a
  // burst. For a caller that takes rarely (a timer), so that stale entries go anyway.
  void ForgetStale(Microseconds now) noexcept;

  std::size_t Size() const noexcept { return m_entries.size(); }
  std::size_t Capacity() const noexcept { return m_capacity; }

 private:
  static constexpr std::uint32_t kNone = 0xFFFF'FFFF;
  struct Entry {
    std::uint64_t source;
    TokenBucket bucket;
    std::uint32_t older = kNone;  // the entry that took before this one (kNone: the oldest)
    std::uint32_t newer = kNone;
  };

  void Unlink(std::uint32_t index) noexcept;
  void LinkNewest(std::uint32_t index) noexcept;
  // Forgets the entry at `index`; the last entry moves into its place.
  void Remove(std::uint32_t index) noexcept;
  void ShrinkAfterBurst() noexcept;

  std::uint64_t m_perSecond;
  std::size_t m_capacity;
  std::vector<Entry> m_entries;                        // dense: an entry's index is its place here
  PeerKeyedMap<std::uint64_t, std::uint32_t> m_index;  // source -> index in m_entries
  std::uint32_t m_oldest = kNone;                      // least recently taken
  std::uint32_t m_newest = kNone;
};

}  // namespace timerwheel::rudp::detail
