// Shard steering and each shard's share of the limits (see Sharding.h).
#include "ReliableUDP/Detail/Sharding.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "ReliableUDP/Detail/WireFormat.h"

namespace timerwheel::rudp::detail {
namespace {

std::uint64_t LoadBig64(const std::uint8_t* bytes) noexcept {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | bytes[i];
  return value;
}

// Every datagram starts with a type byte and the destination ID (docs/reliable-udp-wire-format.md);
// a handshake's source ID, or a Reset's token, follows.
constexpr std::size_t kConnectionIdSize = 8;
constexpr std::size_t kTypeOffset = 0;
constexpr std::size_t kDestinationOffset = 1;
constexpr std::size_t kAfterDestination = 1 + kConnectionIdSize;

std::size_t SharePerShard(std::size_t limit, std::size_t shards) noexcept {
  if (limit == 0) return 0;
  return limit / shards + (limit % shards != 0 ? 1 : 0);
}

}  // namespace

ShardSteering::ShardSteering(std::size_t shards) : m_shards(shards), m_key(RandomSipHashKey()) {}

std::size_t ShardSteering::ShardOf(const Address& from, const std::uint8_t* data,
                                   std::size_t size) const noexcept {
  if (m_shards == 1 || size < kAfterDestination) return 0;
  const auto type = static_cast<PacketType>(data[kTypeOffset] & 0x0Fu);
  switch (type) {
    case PacketType::Hello:
    case PacketType::HelloWithCookie:
    case PacketType::SecureHelloWithCookie: {
      if (size < kAfterDestination + kConnectionIdSize) return 0;
      std::array<std::uint8_t, 1 + 16 + 2 + kConnectionIdSize> key{};  // family, address, port, ID
      key[0] = static_cast<std::uint8_t>(from.family);
      std::copy(from.bytes.begin(), from.bytes.end(), key.begin() + 1);
      key[17] = static_cast<std::uint8_t>(from.port >> 8);
      key[18] = static_cast<std::uint8_t>(from.port);
      std::copy(data + kAfterDestination, data + kAfterDestination + kConnectionIdSize,
                key.begin() + 19);
      return static_cast<std::size_t>(SipHash24(m_key, key.data(), key.size()) % m_shards);
    }
    case PacketType::Reset:
      return kByResetToken;
    default:
      return static_cast<std::size_t>(LoadBig64(data + kDestinationOffset) % m_shards);
  }
}

bool ShardSteering::ResetTokenOf(const std::uint8_t* data, std::size_t size,
                                 ResetToken& token) noexcept {
  if (size < kAfterDestination + kResetTokenSize) return false;
  std::copy(data + kAfterDestination, data + kAfterDestination + kResetTokenSize, token.begin());
  return true;
}

ConnectionId IdOfShard(ConnectionId id, std::uint32_t index, std::uint32_t shards) noexcept {
  if (shards <= 1) return id != 0 ? id : 1;
  ConnectionId base = id - id % shards;
  if (base > UINT64_MAX - index) base -= shards;  // base + index must not wrap
  const ConnectionId moved = base + index;
  return moved != 0 ? moved : shards;  // 0 means "none" on the wire; shards is shard 0's too
}

EndpointOptions OptionsOfShard(const EndpointOptions& whole) {
  const std::size_t shards = whole.shards;
  EndpointOptions shard = whole;
  if (shards <= 1) return shard;
  shard.statelessRepliesPerSecond =
      std::max<std::size_t>(1, SharePerShard(whole.statelessRepliesPerSecond, shards));
  shard.maxReceiveMemory = std::max<std::uint64_t>(
      whole.receiveWindow + 2 * whole.maxDatagramSize,
      SharePerShard(static_cast<std::size_t>(whole.maxReceiveMemory), shards));
  return shard;
}

}  // namespace timerwheel::rudp::detail
