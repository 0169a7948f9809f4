// SipHash-2-4 (libsodium's crypto_shorthash, as the engine calls it) against the reference vectors,
// connection ID generation, handshake cookies, and the record of keyed handshakes that ended
// while their cookie still verifies.
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>

#include "ReliableUDP/Detail/HandshakeCookie.h"
#include "ReliableUDP/Detail/RetiredHandshakes.h"
#include "ReliableUDP/Detail/SipHash.h"
#include "Support/AllocationCounter.h"

using namespace timerwheel::rudp::detail;

namespace {

// The reference key: bytes 00..0f read as two little-endian words.
constexpr SipHashKey kReferenceKey{0x0706050403020100u, 0x0f0e0d0c0b0a0908u};

constexpr SipHashKey kFirst{0x0123456789ABCDEFu, 0xFEDCBA9876543210u};
constexpr SipHashKey kSecond{0x1111222233334444u, 0x5555666677778888u};
constexpr Microseconds kWindow = 10'000'000;  // 10 s

const std::array<std::uint8_t, 4> kAddress = {192, 0, 2, 1};
constexpr std::uint16_t kPort = 40000;
constexpr ConnectionId kClient = 0x0102030405060708u;

}  // namespace

// ---- SipHash ------------------------------------------------------------------------------------

TEST_CASE("SipHash-2-4 matches the reference vectors", "[rudp][siphash]") {
  std::array<std::uint8_t, 16> message{};
  for (std::size_t i = 0; i < message.size(); ++i) message[i] = static_cast<std::uint8_t>(i);
  // Message 00..(n-1) under key 00..0f; n = 15 is the worked example in the paper's appendix.
  const std::pair<std::size_t, std::uint64_t> vectors[] = {
      {0, 0x726fdb47dd0e0e31u}, {1, 0x74f839c593dc67fdu}, {7, 0xab0200f58b01d137u},
      {8, 0x93f5f5799a932462u}, {9, 0x9e0082df0ba9e4b0u}, {15, 0xa129ca6149be45e5u},
      {16, 0x3f2acc7f57c29bdbu}};
  for (const auto& [size, expected] : vectors) {
    INFO("length " << size);
    CHECK(SipHash24(kReferenceKey, message.data(), size) == expected);
  }
  CHECK(SipHash24(kReferenceKey, nullptr, 0) == 0x726fdb47dd0e0e31u);
  CHECK(SipHash24(SipHashKey{}, nullptr, 0) == 0x1e924b9d737700d7u);
}

TEST_CASE("SipHash depends on every key and message bit", "[rudp][siphash]") {
  std::array<std::uint8_t, 13> message = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const std::uint64_t base = SipHash24(kFirst, message.data(), message.size());
  for (std::size_t bit = 0; bit < 8 * message.size(); ++bit) {
    message[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    CHECK(SipHash24(kFirst, message.data(), message.size()) != base);
    message[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  }
  for (int bit = 0; bit < 128; ++bit) {
    SipHashKey key = kFirst;
    (bit < 64 ? key.k0 : key.k1) ^= std::uint64_t{1} << (bit % 64);
    CHECK(SipHash24(key, message.data(), message.size()) != base);
  }
  // A trailing zero byte changes the length, so it changes the hash.
  const std::array<std::uint8_t, 2> padded = {1, 0};
  CHECK(SipHash24(kFirst, padded.data(), 1) != SipHash24(kFirst, padded.data(), 2));
}

TEST_CASE("random SipHash keys differ", "[rudp][siphash]") {
  const SipHashKey a = RandomSipHashKey();
  const SipHashKey b = RandomSipHashKey();
  CHECK((a.k0 != b.k0 || a.k1 != b.k1));
  CHECK((a.k0 != 0 || a.k1 != 0));
}

TEST_CASE("connection IDs are the SipHash of a little-endian counter, never 0", "[rudp][siphash]") {
  ConnectionIdGenerator generator(kReferenceKey);
  std::set<std::uint64_t> seen;
  for (std::uint64_t counter = 0; counter < 1000; ++counter) {
    std::uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<std::uint8_t>(counter >> (8 * i));
    const std::uint64_t id = generator.Next();
    REQUIRE(id == SipHash24(kReferenceKey, bytes, 8));
    REQUIRE(id != 0);
    seen.insert(id);
  }
  CHECK(seen.size() == 1000);
  // Counter 0..7 as bytes 00..07 is the reference message of length 8.
  CHECK(ConnectionIdGenerator(kReferenceKey).Next() != 0);
  ConnectionIdGenerator other(kFirst);
  CHECK(other.Next() != ConnectionIdGenerator(kReferenceKey).Next());
}

// ---- Handshake cookies --------------------------------------------------------------------------

TEST_CASE("a cookie carries its window index and verifies in that window and the next",
          "[rudp][cookie]") {
  const HandshakeCookie cookies(kFirst, kSecond, kWindow);
  const Microseconds minted = 5 * kWindow + 1234;
  const HandshakeCookie::Value cookie =
      cookies.Mint(kAddress.data(), kAddress.size(), kPort, kClient, minted);
  for (std::size_t i = 0; i < 7; ++i) CHECK(cookie[i] == 0);
  CHECK(cookie[7] == 5);
  CHECK(cookie == cookies.Mint(kAddress.data(), kAddress.size(), kPort, kClient, 5 * kWindow));

  const auto verify = [&](Microseconds now) {
    return cookies.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, now);
  };
  CHECK(verify(minted));
  CHECK(verify(5 * kWindow));
  CHECK(verify(6 * kWindow - 1));
  CHECK(verify(6 * kWindow));
  CHECK(verify(7 * kWindow - 1));
  CHECK_FALSE(verify(7 * kWindow));  // two windows later: stale
  CHECK_FALSE(verify(100 * kWindow));
  CHECK_FALSE(verify(5 * kWindow - 1));  // minted in the future
  CHECK_FALSE(verify(0));
}

TEST_CASE("a cookie minted in window 0 verifies at time 0", "[rudp][cookie]") {
  const HandshakeCookie cookies(kFirst, kSecond, kWindow);
  const auto cookie = cookies.Mint(kAddress.data(), kAddress.size(), kPort, kClient, 0);
  CHECK(cookies.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, 0));
  CHECK(cookies.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, kWindow));
  CHECK_FALSE(
      cookies.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, 2 * kWindow));
}

TEST_CASE("a cookie is bound to the address, port and connection ID", "[rudp][cookie]") {
  const HandshakeCookie cookies(kFirst, kSecond, kWindow);
  const Microseconds now = 3 * kWindow;
  const auto cookie = cookies.Mint(kAddress.data(), kAddress.size(), kPort, kClient, now);
  REQUIRE(cookies.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, now));

  for (std::size_t i = 0; i < kAddress.size(); ++i) {
    auto other = kAddress;
    other[i] ^= 1;
    CHECK_FALSE(cookies.Verify(cookie, other.data(), other.size(), kPort, kClient, now));
  }
  for (int bit = 0; bit < 16; ++bit) {
    const auto port = static_cast<std::uint16_t>(kPort ^ (1u << bit));
    CHECK_FALSE(cookies.Verify(cookie, kAddress.data(), kAddress.size(), port, kClient, now));
  }
  for (int bit = 0; bit < 64; ++bit) {
    const ConnectionId client = kClient ^ (std::uint64_t{1} << bit);
    CHECK_FALSE(cookies.Verify(cookie, kAddress.data(), kAddress.size(), kPort, client, now));
  }
  CHECK_FALSE(cookies.Verify(cookie, kAddress.data(), kAddress.size() - 1, kPort, kClient, now));

  // The IPv4-mapped IPv6 form of the same address is a different address.
  const std::array<std::uint8_t, 16> mapped = {0, 0, 0,    0,    0,   0, 0, 0,
                                               0, 0, 0xFF, 0xFF, 192, 0, 2, 1};
  CHECK_FALSE(cookies.Verify(cookie, mapped.data(), mapped.size(), kPort, kClient, now));
  const auto v6 = cookies.Mint(mapped.data(), mapped.size(), kPort, kClient, now);
  CHECK(cookies.Verify(v6, mapped.data(), mapped.size(), kPort, kClient, now));

  // Other keys, either of the two.
  const HandshakeCookie otherFirst(kSecond, kSecond, kWindow);
  const HandshakeCookie otherSecond(kFirst, kFirst, kWindow);
  CHECK_FALSE(otherFirst.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, now));
  CHECK_FALSE(otherSecond.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, now));
}

TEST_CASE("any flipped bit of a cookie makes it invalid", "[rudp][cookie]") {
  const HandshakeCookie cookies(kFirst, kSecond, kWindow);
  const Microseconds now = 8 * kWindow;
  const auto cookie = cookies.Mint(kAddress.data(), kAddress.size(), kPort, kClient, now);
  for (std::size_t bit = 0; bit < 8 * kCookieSize; ++bit) {
    auto altered = cookie;
    altered[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    INFO("bit " << bit);
    // Flipping the lowest index bit gives window 9, which is in the future: try both windows.
    CHECK_FALSE(cookies.Verify(altered, kAddress.data(), kAddress.size(), kPort, kClient, now));
    CHECK_FALSE(
        cookies.Verify(altered, kAddress.data(), kAddress.size(), kPort, kClient, now + kWindow));
  }
}

TEST_CASE("a cookie re-dated to the current window is rejected", "[rudp][cookie]") {
  const HandshakeCookie cookies(kFirst, kSecond, kWindow);
  auto cookie = cookies.Mint(kAddress.data(), kAddress.size(), kPort, kClient, 2 * kWindow);
  cookie[7] = 4;  // an attacker keeping an old cookie alive
  CHECK_FALSE(
      cookies.Verify(cookie, kAddress.data(), kAddress.size(), kPort, kClient, 4 * kWindow));
}

TEST_CASE("addresses longer than 16 bytes never verify", "[rudp][cookie]") {
  const HandshakeCookie cookies(kFirst, kSecond, kWindow);
  const std::array<std::uint8_t, 17> longAddress{};
  const auto cookie = cookies.Mint(longAddress.data(), longAddress.size(), kPort, kClient, 0);
  CHECK_FALSE(cookies.Verify(cookie, longAddress.data(), longAddress.size(), kPort, kClient, 0));
}

// ---- Retired handshakes
// ---------------------------------------------------------------------------

TEST_CASE("a retired handshake is held until its own expiry, whatever the order they retired in",
          "[rudp][handshake][replay]") {
  RetiredHandshakes retired(3);
  for (int i = 0; i < 3; ++i) retired.Reserve();  // as each connection is accepted
  // Connections end in any order: the second to retire expires first.
  retired.Add(1, 30);
  retired.Add(2, 10);
  CHECK_FALSE(retired.Full());
  retired.Add(3, 20);
  CHECK(retired.Reserved() == 0);
  CHECK(retired.Full());
  CHECK(retired.Contains(1));
  CHECK(retired.Contains(2));
  CHECK_FALSE(retired.Contains(4));

  retired.Expire(9);
  CHECK(retired.Size() == 3);
  retired.Expire(10);  // an entry goes at its expiry, not before
  CHECK_FALSE(retired.Contains(2));
  CHECK(retired.Contains(1));
  CHECK(retired.Contains(3));
  CHECK_FALSE(retired.Full());
  retired.Expire(25);
  CHECK(retired.Size() == 1);
  CHECK(retired.Contains(1));
  retired.Expire(30);
  CHECK(retired.Size() == 0);
}

// An entry is added as its connection ends, which must not fail: into a room reserved when the
// connection was accepted, which Expire's rebuilds keep.
TEST_CASE("a retired handshake goes into a room reserved at its accept, and allocates nothing",
          "[rudp][handshake][replay]") {
  RetiredHandshakes retired(100000);
  // A burst of retired handshakes, then most expire: the containers are rebuilt smaller.
  for (std::uint64_t i = 1; i <= 5000; ++i) {
    retired.Reserve();
    retired.Add(i, static_cast<Microseconds>(i));
  }
  for (int i = 0; i < 400; ++i) retired.Reserve();  // connections still open
  retired.Expire(4990);
  REQUIRE(retired.Size() == 10);
  CHECK(retired.Reserved() == 400);
  // A room given back is no longer there; the others still are.
  retired.Unreserve();
  CHECK(retired.Reserved() == 399);
  {
    timerwheel::test::FailNthAllocation failure(1);
    for (std::uint64_t i = 0; i < 399; ++i) retired.Add(100000 + i, 10000);
    CHECK_FALSE(failure.Failed());
  }
  CHECK(retired.Size() == 409);
  CHECK(retired.Contains(100398));
  CHECK(retired.Reserved() == 0);
  retired.Expire(10000);
  CHECK(retired.Size() == 0);
}

// A burst of keyed accepts reserves a room each: the containers grow geometrically, so the
// allocations are one node per room and a few growths, not a copy of everything at every peak.
TEST_CASE("reserving rooms for a burst of accepts allocates a node each and grows geometrically",
          "[rudp][handshake][replay]") {
  RetiredHandshakes retired(1u << 20);
  constexpr std::size_t kRooms = 20000;
  std::size_t allocations = 0;
  {
    timerwheel::test::CountAllocations count;
    for (std::size_t i = 0; i < kRooms; ++i) retired.Reserve();
    allocations = count.Count();
  }
  CHECK(retired.Reserved() == kRooms);
  CHECK(allocations <= kRooms + 3 * 64);  // the nodes, and each container's doublings
}
