// How one endpoint's connections are split over shards (EndpointOptions::shards, issue 18): which
// shard a datagram belongs to, which connection IDs a shard hands out, and each shard's share of
// the endpoint-wide limits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/Address.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SipHash.h"
#include "ReliableUDP/EndpointOptions.h"

namespace timerwheel::rudp::detail {

// A shard owns the connection IDs that are `index` modulo the shard count, so a packet finds its
// shard from its destination ID alone, without a shared table. A handshake (which has no ID of
// ours yet) goes to the shard a keyed hash of the client's address, port and ID picks: its
// repeats go to the same shard, and nobody can aim every handshake at one shard without knowing
// the key. A Reset names the peer's ID, not ours: it goes to the shard that knows its token.
class ShardSteering {
 public:
  static constexpr std::size_t kByResetToken = SIZE_MAX;

  explicit ShardSteering(std::size_t shards);

  std::size_t Shards() const noexcept { return m_shards; }
  // The shard of this datagram; kByResetToken for a Reset (with more than one shard). Anything
  // too short to say goes to shard 0, which drops and counts it as usual.
  std::size_t ShardOf(const Address& from, const std::uint8_t* data,
                      std::size_t size) const noexcept;
  // The token of a Reset datagram (false: too short to hold one).
  static bool ResetTokenOf(const std::uint8_t* data, std::size_t size, ResetToken& token) noexcept;

 private:
  std::size_t m_shards;
  SipHashKey m_key;
};

// `id` moved to the nearest ID of shard `index` of `shards` (never 0).
ConnectionId IdOfShard(ConnectionId id, std::uint32_t index, std::uint32_t shards) noexcept;

// One shard's options: the stateless-reply rate and the receive memory divided by the shard
// count, rounded up, and never below what the options' own validation requires. The limits on
// connections (maxConnections, per address, per prefix, the new-connection rate) are not divided:
// the shards share one admission control, which keeps them exact whichever shard a connection
// lands on. Nor is the accept backlog: each shard's queue holds at most that many.
EndpointOptions OptionsOfShard(const EndpointOptions& whole);

}  // namespace timerwheel::rudp::detail
