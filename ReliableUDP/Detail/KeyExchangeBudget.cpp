// KeyExchangeBudget: the endpoint's key exchanges, and each address's and prefix's share.
#include "ReliableUDP/Detail/KeyExchangeBudget.h"

#include <algorithm>
#include <array>

namespace timerwheel::rudp::detail {
namespace {

// Room for every source that can have taken a key exchange within the last second: the
// budget's bucket allows its one-second burst plus one second's refill, 2 x its rate.
std::size_t ShareTableCapacity(const EndpointOptions& options) noexcept {
  const std::uint64_t rate = (std::min)(std::uint64_t{options.newConnectionsPerSecond},
                                        std::uint64_t{RecentTokenBuckets::kMaxCapacity});
  return static_cast<std::size_t>(
      (std::min)(2 * rate + 1, std::uint64_t{RecentTokenBuckets::kMaxCapacity}));
}

// The family, then the first `count` bytes of the address.
std::uint64_t HashOf(const SipHashKey& key, const Address& from, std::size_t count) noexcept {
  std::array<std::uint8_t, 17> bytes{};
  bytes[0] = static_cast<std::uint8_t>(from.family);
  std::copy(from.bytes.begin(), from.bytes.begin() + static_cast<std::ptrdiff_t>(count),
            bytes.begin() + 1);
  return SipHash24(key, bytes.data(), 1 + count);
}

}  // namespace

KeyExchangeBudget::KeyExchangeBudget(const EndpointOptions& options)
    : m_limited(options.newConnectionsPerSecond != 0),
      m_budget(options.newConnectionsPerSecond),
      m_hashKey(RandomSipHashKey()),
      m_addresses(options.keyExchangesPerAddressPerSecond, ShareTableCapacity(options)),
      m_prefixes(options.keyExchangesPerPrefixPerSecond, ShareTableCapacity(options)) {}

KeyExchangeBudget::Verdict KeyExchangeBudget::TryTake(const Address& from, Microseconds now) {
  if (!m_limited) return Verdict::Granted;
  const std::uint64_t address = AddressKey(from);
  const std::uint64_t prefix = PrefixKey(from);
  // The shares first: a source over its share must not spend the budget of the others.
  if (!m_addresses.HasToken(address, now)) return Verdict::AddressShareSpent;
  if (!m_prefixes.HasToken(prefix, now)) return Verdict::PrefixShareSpent;
  if (!m_budget.Available(now)) return Verdict::BudgetSpent;
  // Each take below succeeds (a token was there a moment ago, and the tables have room: the
  // budget allows fewer takes in a second than they hold). An allocation that fails in the
  // second leaves the first's token spent, as a failed open leaves its admission token spent.
  if (!m_prefixes.Take(prefix, now)) return Verdict::PrefixShareSpent;
  if (!m_addresses.Take(address, now)) return Verdict::AddressShareSpent;
  m_budget.TryTake(now);
  return Verdict::Granted;
}

void KeyExchangeBudget::ForgetStale(Microseconds now) noexcept {
  m_addresses.ForgetStale(now);
  m_prefixes.ForgetStale(now);
}

std::uint64_t KeyExchangeBudget::AddressKey(const Address& from) const noexcept {
  return HashOf(m_hashKey, from, from.ByteCount());
}

std::uint64_t KeyExchangeBudget::PrefixKey(const Address& from) const noexcept {
  return HashOf(m_hashKey, from, from.PrefixByteCount());
}

}  // namespace timerwheel::rudp::detail
