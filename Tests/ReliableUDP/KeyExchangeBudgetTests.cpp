// The key-exchange budget's shares (KeyExchangeBudget, RecentTokenBuckets): one address or one
// prefix takes at most its share, the table of shares holds only recent sources, and a full
// table never pushes out a source that still counts.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/Address.h"
#include "ReliableUDP/Detail/KeyExchangeBudget.h"
#include "ReliableUDP/Detail/RecentTokenBuckets.h"
#include "ReliableUDP/EndpointOptions.h"

using namespace timerwheel::rudp::detail;
using timerwheel::rudp::EndpointOptions;
using timerwheel::rudp::ValidateOptions;

namespace {

constexpr Microseconds kSecond = 1'000'000;
constexpr Microseconds kStart = 1'000'000'000'123;

Address V4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  Address address;
  address.family = Address::Family::V4;
  address.bytes[0] = a;
  address.bytes[1] = b;
  address.bytes[2] = c;
  address.bytes[3] = d;
  address.port = 4000;
  return address;
}

Address V6(std::uint8_t seventh, std::uint8_t last) {
  Address address;
  address.family = Address::Family::V6;
  address.bytes[0] = 0x20;
  address.bytes[1] = 0x01;
  address.bytes[6] = seventh;  // inside the /56
  address.bytes[15] = last;    // outside it
  address.port = 4000;
  return address;
}

// How many key exchanges `from` gets at `now`, trying `tries` times.
std::size_t Granted(KeyExchangeBudget& budget, const Address& from, Microseconds now,
                    std::size_t tries) {
  std::size_t granted = 0;
  for (std::size_t i = 0; i < tries; ++i) {
    if (budget.TryTake(from, now) == KeyExchangeBudget::Verdict::Granted) ++granted;
  }
  return granted;
}

}  // namespace

TEST_CASE("a source's bucket holds one second's tokens and refills at its rate; others are apart",
          "[rudp][admission][key-exchange]") {
  RecentTokenBuckets buckets(10, 100);
  for (int i = 0; i < 10; ++i) REQUIRE(buckets.Take(1, kStart));
  CHECK_FALSE(buckets.HasToken(1, kStart));
  CHECK_FALSE(buckets.Take(1, kStart));
  CHECK(buckets.HasToken(2, kStart));  // another source: its own full bucket
  for (int i = 0; i < 10; ++i) CHECK(buckets.Take(2, kStart));
  CHECK(buckets.Size() == 2);
  // 100 ms: one token back, at 10 a second.
  CHECK(buckets.Take(1, kStart + kSecond / 10));
  CHECK_FALSE(buckets.Take(1, kStart + kSecond / 10));
}

TEST_CASE(
    "a full table of sources gives a place only to a stale one: a source that still counts is "
    "never pushed out",
    "[rudp][admission][key-exchange]") {
  RecentTokenBuckets buckets(2, 4);  // two tokens a second, a burst of two
  for (std::uint64_t source = 1; source <= 4; ++source) {
    REQUIRE(buckets.Take(source, kStart));
    REQUIRE(buckets.Take(source, kStart));  // each spends its burst
  }
  for (std::uint64_t source = 1; source <= 4; ++source) {
    CHECK_FALSE(buckets.Take(source, kStart + kSecond / 4));  // half a token each
  }
  // Half a second on, every entry still counts (a token back of two): a fifth source is
  // refused, and nobody is forgotten.
  CHECK_FALSE(buckets.Take(5, kStart + kSecond / 2));
  CHECK(buckets.Size() == 4);
  // Source 1 takes again at 0.9 s (1.8 tokens, 0.8 left): it is now the most recently used.
  REQUIRE(buckets.Take(1, kStart + 9 * kSecond / 10));
  // At 1 s sources 2, 3 and 4 are full again (stale) and source 1 is not: the fifth takes the
  // place of the least recently used, source 2, and the take forgets the stale 3 and 4 too.
  const Microseconds later = kStart + kSecond;
  REQUIRE(buckets.Take(5, later));
  CHECK(buckets.Size() == 2);
  // Source 1 kept its entry: one token (0.8 + 0.2), not a fresh bucket's two.
  CHECK(buckets.Take(1, later));
  CHECK_FALSE(buckets.Take(1, later));
}

TEST_CASE("stale sources go a few at a time, each call O(1), until none is left",
          "[rudp][admission][key-exchange]") {
  RecentTokenBuckets buckets(1, 10'000);
  for (std::uint64_t source = 1; source <= 5'000; ++source) REQUIRE(buckets.Take(source, kStart));
  CHECK(buckets.Size() == 5'000);
  buckets.ForgetStale(kStart + kSecond / 2);  // none is stale yet
  CHECK(buckets.Size() == 5'000);
  const Microseconds later = kStart + kSecond;
  buckets.ForgetStale(later);
  CHECK(buckets.Size() == 5'000 - RecentTokenBuckets::kForgetPerCall);
  // A take forgets as many as ForgetStale does.
  REQUIRE(buckets.Take(9'999, later));
  CHECK(buckets.Size() == 5'000 - 2 * RecentTokenBuckets::kForgetPerCall + 1);
  std::size_t calls = 0;
  while (buckets.Size() > 1 && calls < 10'000) {
    buckets.ForgetStale(later);
    ++calls;
  }
  CHECK(buckets.Size() == 1);  // the source that took just now
  CHECK(calls <= 5'000 / RecentTokenBuckets::kForgetPerCall);
  // What is left still decides: source 9,999 has no token left this second.
  CHECK_FALSE(buckets.Take(9'999, later));
}

TEST_CASE("one address, and one prefix, take at most their share of the key-exchange budget",
          "[rudp][admission][key-exchange]") {
  EndpointOptions options;
  options.acceptIncoming = true;
  options.newConnectionsPerSecond = 100;
  options = ValidateOptions(options);
  REQUIRE(options.keyExchangesPerAddressPerSecond == 10);  // a tenth
  REQUIRE(options.keyExchangesPerPrefixPerSecond == 25);   // a quarter
  KeyExchangeBudget budget(options);
  CHECK(budget.TableCapacity() == 201);

  // One address: its share, then refused for its address.
  CHECK(Granted(budget, V4(192, 0, 2, 1), kStart, 50) == 10);
  CHECK(budget.TryTake(V4(192, 0, 2, 1), kStart) == KeyExchangeBudget::Verdict::AddressShareSpent);
  // Others of its /24: together with it, the prefix's share.
  CHECK(Granted(budget, V4(192, 0, 2, 2), kStart, 50) == 10);
  CHECK(Granted(budget, V4(192, 0, 2, 3), kStart, 50) == 5);
  CHECK(budget.TryTake(V4(192, 0, 2, 4), kStart) == KeyExchangeBudget::Verdict::PrefixShareSpent);
  // Another /24 has its own.
  CHECK(Granted(budget, V4(192, 0, 3, 1), kStart, 50) == 10);
  // IPv6: addresses that differ only past the /56 share a prefix.
  CHECK(Granted(budget, V6(1, 1), kStart, 50) == 10);
  CHECK(Granted(budget, V6(1, 2), kStart, 50) == 10);
  CHECK(Granted(budget, V6(1, 3), kStart, 50) == 5);
  CHECK(Granted(budget, V6(2, 1), kStart, 50) == 10);
  CHECK(budget.TrackedAddresses() == 8);
  CHECK(budget.TrackedPrefixes() == 4);
  // 70 taken: many sources spend the rest of the budget, then everyone is refused for it.
  std::size_t rest = 0;
  for (std::uint8_t prefix = 10; prefix < 40; ++prefix) {
    rest += Granted(budget, V4(198, 51, prefix, 1), kStart, 2);
  }
  CHECK(rest == 30);
  CHECK(budget.TryTake(V4(203, 0, 113, 1), kStart) == KeyExchangeBudget::Verdict::BudgetSpent);

  // A second later every share and the budget are whole again.
  CHECK(Granted(budget, V4(192, 0, 2, 1), kStart + kSecond, 50) == 10);
}

TEST_CASE("without a connection rate, key exchanges are not limited and nothing is held",
          "[rudp][admission][key-exchange]") {
  EndpointOptions options;
  options.acceptIncoming = true;
  options.newConnectionsPerSecond = 0;
  options = ValidateOptions(options);
  KeyExchangeBudget budget(options);
  CHECK(Granted(budget, V4(192, 0, 2, 1), kStart, 5'000) == 5'000);
  CHECK(budget.TrackedAddresses() == 0);
  CHECK(budget.TrackedPrefixes() == 0);
}
