// The key exchanges a server spends on keyed handshakes: a budget for the endpoint, and the
// share of it that one address, or one prefix, may take.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/Address.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/RecentTokenBuckets.h"
#include "ReliableUDP/Detail/SipHash.h"
#include "ReliableUDP/Detail/TokenBucket.h"
#include "ReliableUDP/EndpointOptions.h"

namespace timerwheel::rudp::detail {

// A keyed handshake costs the server an X25519 before it can tell a client from junk, and one
// valid cookie can be replayed with junk again and again (a handshake that fails to open leaves
// nothing behind to recognise it by). So key exchanges take a token of a bucket of
// newConnectionsPerSecond (a one-second burst). A bucket for all alone let one host that got a
// single cookie for its own address spend all of it, replaying that cookie at the bucket's rate
// (10,000 datagrams a second, 96 Mbit/s, at the defaults), and every honest keyed handshake was
// refused (ServerBusy). So each source IP address and each /24 (IPv4) or /56 (IPv6) prefix also
// has a bucket of its share (keyExchangesPerAddressPerSecond, keyExchangesPerPrefixPerSecond),
// taken from first: one host, or one network, spends at most its share, and the rest of the
// budget stays for everyone else. (The admission limits per address and prefix count
// connections, which a host that never completes a handshake does not hold.)
//
// Memory: the share buckets are held only for sources that took a key exchange within the last
// second (RecentTokenBuckets). Every take also takes a token of the endpoint's bucket, so at
// most 2 x newConnectionsPerSecond takes fall within any second, and each table holds at most
// 2 x newConnectionsPerSecond + 1 entries, at most 144 bytes each (5.8 MB for both at the
// defaults, under a flood from 20,000 addresses; nothing without keyed handshakes). A new source
// always finds room, and only a stale entry ever gives its place (see RecentTokenBuckets); stale
// entries go a few at a time at each take and each ForgetStale (the shard's timer expiries), so a
// shard with neither keeps them, within that bound, until it has. CPU: at most seven SipHashes
// and five hash lookups per keyed handshake that passed its cookie check, O(1).
//
// With newConnectionsPerSecond 0 key exchanges are not limited at all, and nothing is held.
//
// Not thread-safe (the endpoint's lock guards it). One per EndpointCore: each shard of an
// endpoint has its budget and its shares, as it had its bucket.
class KeyExchangeBudget {
 public:
  enum class Verdict {
    Granted,            // a token of each taken: do the key exchange
    AddressShareSpent,  // the source address has spent its share this second
    PrefixShareSpent,   // its prefix has
    BudgetSpent,        // the endpoint's budget is spent (by many sources)
  };

  // `options` validated (ValidateOptions fills in the shares). Throws std::runtime_error if
  // there is no random source (the hash keys).
  explicit KeyExchangeBudget(const EndpointOptions& options);

  // Takes a key exchange for a handshake from `from`: one token of its address's share, of its
  // prefix's and of the budget, or none (and says which was spent). If it throws
  // std::bad_alloc (a new source's entry), the budget's token is not taken.
  Verdict TryTake(const Address& from, Microseconds now);
  // Forgets a few stale share entries (the endpoint's timers call it, so that they go even
  // when no keyed handshake comes).
  void ForgetStale(Microseconds now) noexcept;

  std::size_t TrackedAddresses() const noexcept { return m_addresses.Size(); }
  std::size_t TrackedPrefixes() const noexcept { return m_prefixes.Size(); }
  // The most entries each of the two tables can hold.
  std::size_t TableCapacity() const noexcept { return m_addresses.Capacity(); }

 private:
  // Keyed hashes of the address, and of its prefix (what the tables know a source by).
  std::uint64_t AddressKey(const Address& from) const noexcept;
  std::uint64_t PrefixKey(const Address& from) const noexcept;

  bool m_limited;  // newConnectionsPerSecond != 0
  TokenBucket m_budget;
  SipHashKey m_hashKey;
  RecentTokenBuckets m_addresses;
  RecentTokenBuckets m_prefixes;
};

}  // namespace timerwheel::rudp::detail
