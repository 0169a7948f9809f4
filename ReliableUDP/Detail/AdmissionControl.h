// Which new connections a server takes: limits per address, per prefix, and a rate.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "ReliableUDP/Detail/Address.h"
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
// Not thread-safe (the endpoint's lock guards it).
class AdmissionControl {
 public:
  explicit AdmissionControl(const EndpointOptions& options) noexcept;

  // Whether a connection from `from` may be admitted now (nothing is taken).
  bool MayAdmit(const Address& from, Microseconds now);
  // A connection from `from` was admitted: counts it and takes a rate token.
  void OnAdmitted(const Address& from, Microseconds now);
  // A connection admitted from `from` ended.
  void OnEnded(const Address& from);

  std::size_t TrackedAddresses() const noexcept { return m_byAddress.size(); }
  std::size_t TrackedPrefixes() const noexcept { return m_byPrefix.size(); }

 private:
  struct Key {
    std::array<std::uint8_t, 17> bytes{};  // family, then the (masked) address bytes
    bool operator==(const Key& other) const noexcept { return bytes == other.bytes; }
  };
  struct KeyHash {
    std::size_t operator()(const Key& key) const noexcept;
  };
  using Counts = std::unordered_map<Key, std::size_t, KeyHash>;

  static Key AddressKey(const Address& address) noexcept;
  static Key PrefixKey(const Address& address) noexcept;
  static void Decrement(Counts& counts, const Key& key);

  std::size_t m_perAddress;
  std::size_t m_perPrefix;
  TokenBucket m_rate;
  Counts m_byAddress;
  Counts m_byPrefix;
};

}  // namespace timerwheel::rudp::detail
