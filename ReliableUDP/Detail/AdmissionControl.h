// Which new connections an endpoint takes: a connection limit, and (servers) limits per address,
// per prefix, and a rate.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/Address.h"
#include "ReliableUDP/Detail/PeerKeyedMap.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/TokenBucket.h"
#include "ReliableUDP/EndpointOptions.h"

namespace timerwheel::rudp::detail {

// Counts the server's connections by source IP address (any port) and by prefix (/24 for IPv4,
// /56 for IPv6: what one customer typically gets), and takes one token of an endpoint-wide
// bucket per new connection. The rate is endpoint-wide rather than per prefix on purpose: a
// per-prefix rate needs state for prefixes with no connection left, which a churning attacker
// would grow without bound. Both maps hold only keys with a connection open, so they are bounded
// by the connection count and shrink (rehashed down) when it falls.
//
// What an EndpointCore asks of its admission limits: its own AdmissionControl, or (the shards of
// one endpoint, EndpointOptions::shards) one shared behind a lock outside the engine.
class IAdmission {
 public:
  // Whether a connection from `from` may be admitted now (nothing is taken).
  virtual bool MayAdmit(const Address& from, Microseconds now) = 0;
  // A connection from `from` was admitted: counts it and takes a rate token. If it throws (an
  // allocation failed), it changed nothing.
  virtual void OnAdmitted(const Address& from, Microseconds now) = 0;
  // A connection admitted from `from` ended. Allocates nothing, so it cannot fail.
  virtual void OnEnded(const Address& from) = 0;
  // The connection limit (maxConnections), over connections of every kind: whether another may
  // open, and one opened or ended.
  virtual bool UnderConnectionLimit() const = 0;
  virtual void OnOpened() = 0;
  virtual void OnClosed() = 0;
  virtual std::size_t TrackedAddresses() const = 0;
  virtual std::size_t TrackedPrefixes() const = 0;

 protected:
  ~IAdmission() = default;
};

// Not thread-safe (the endpoint's lock guards it, or ReliableUDP/SharedAdmission.h's).
class AdmissionControl final : public IAdmission {
 public:
  // Throws std::runtime_error if there is no random source (its maps' hash keys).
  explicit AdmissionControl(const EndpointOptions& options);

  bool MayAdmit(const Address& from, Microseconds now) override;
  void OnAdmitted(const Address& from, Microseconds now) override;
  void OnEnded(const Address& from) override;
  bool UnderConnectionLimit() const noexcept override { return m_open < m_maxConnections; }
  void OnOpened() noexcept override { ++m_open; }
  void OnClosed() noexcept override { --m_open; }

  std::size_t TrackedAddresses() const noexcept override { return m_byAddress.size(); }
  std::size_t TrackedPrefixes() const noexcept override { return m_byPrefix.size(); }

 private:
  struct Key {
    std::array<std::uint8_t, 17> bytes{};  // family, then the (masked) address bytes
    bool operator==(const Key& other) const noexcept { return bytes == other.bytes; }
    // Keyed (PeerKeyedMap): FNV-1a let a peer search out IPv6 addresses that share a bucket.
    friend const std::array<std::uint8_t, 17>& HashBytes(const Key& key) noexcept {
      return key.bytes;
    }
  };
  using Counts = PeerKeyedMap<Key, std::size_t>;

  static Key AddressKey(const Address& address) noexcept;
  static Key PrefixKey(const Address& address) noexcept;
  static void Decrement(Counts& counts, const Key& key);

  std::size_t m_maxConnections;
  std::size_t m_open = 0;  // connections of every kind
  std::size_t m_perAddress;
  std::size_t m_perPrefix;
  TokenBucket m_rate;
  Counts m_byAddress;
  Counts m_byPrefix;
};

}  // namespace timerwheel::rudp::detail
