// ValidateOptions: what it refuses (naming the option), and the defaults it derives.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "ReliableUDP/EndpointOptions.h"

using Catch::Matchers::Contains;
using timerwheel::rudp::CongestionControl;
using timerwheel::rudp::EndpointOptions;
using timerwheel::rudp::TimerQueueKind;
using timerwheel::rudp::ValidateOptions;

namespace {

constexpr std::size_t kHuge = std::numeric_limits<std::size_t>::max();

}  // namespace

// Near 2^64 the engine's `consumed + window` wrapped: the connection failed with ProtocolError
// after its first message (receiveWindow = SIZE_MAX passed, since the check's own sum wrapped).
TEST_CASE("windows and buffers beyond 2^40 bytes are refused", "[options]") {
  EndpointOptions options;
  options.receiveWindow = kHuge;
  CHECK_THROWS_WITH(ValidateOptions(options), Contains("receiveWindow"));
  options.receiveWindow = kHuge - 10'000;
  options.maxReceiveMemory = std::numeric_limits<std::uint64_t>::max();
  CHECK_THROWS_WITH(ValidateOptions(options), Contains("receiveWindow"));

  EndpointOptions send;
  send.sendBufferSize = kHuge;
  CHECK_THROWS_WITH(ValidateOptions(send), Contains("sendBufferSize"));
  EndpointOptions perConnection;
  perConnection.maxReceiveMemoryPerConnection = kHuge;
  CHECK_THROWS_WITH(ValidateOptions(perConnection), Contains("maxReceiveMemoryPerConnection"));

  EndpointOptions largest;
  largest.receiveWindow = std::size_t{1} << 40;
  largest.maxReceiveMemory = std::uint64_t{1} << 41;
  CHECK(ValidateOptions(largest).receiveWindow == std::size_t{1} << 40);
}

TEST_CASE("a server needs room for one established connection in its accept backlog", "[options]") {
  EndpointOptions options;
  options.acceptBacklog = 0;
  CHECK_NOTHROW(ValidateOptions(options));  // a client: no backlog needed
  options.acceptIncoming = true;            // a server that could accept nothing
  CHECK_THROWS_WITH(ValidateOptions(options), Contains("acceptBacklog"));
}

TEST_CASE("values outside the option enumerations are refused", "[options]") {
  EndpointOptions options;
  options.congestionControl = static_cast<CongestionControl>(77);
  CHECK_THROWS_WITH(ValidateOptions(options), Contains("congestionControl"));
  EndpointOptions queue;
  queue.timerQueue = static_cast<TimerQueueKind>(77);
  CHECK_THROWS_WITH(ValidateOptions(queue), Contains("timerQueue"));
}

// Finished handshakes are remembered for two cookie windows: the window bounds that table.
TEST_CASE("a cookie window longer than ten minutes is refused", "[options]") {
  EndpointOptions options;
  options.cookieWindow = 600'000;
  CHECK_NOTHROW(ValidateOptions(options));
  options.cookieWindow = 600'001;
  CHECK_THROWS_WITH(ValidateOptions(options), Contains("cookieWindow"));
}

TEST_CASE("the defaults derived from a small window meet their own minimums", "[options]") {
  EndpointOptions options;
  options.maxMessageSize = 1;
  options.receiveWindow = 9;
  const EndpointOptions valid = ValidateOptions(options);
  CHECK(valid.sendBufferSize == 64);
  CHECK(valid.maxReceiveMemoryPerConnection == 2 * valid.maxDatagramSize);
}

// A pinned key of small order gives an all-zero DH result whatever the client's scalar: the
// client used to skip the DH and seal its hello (and accept a Welcome) under keys made of public
// values alone, so that anyone could read its token and complete the handshake in the server's
// place. Refused with the other bad options.
TEST_CASE("a pinned server key of small order is refused", "[options][encryption]") {
  using Key = std::array<std::uint8_t, 32>;
  Key one{};
  one[0] = 1;      // the identity's u-coordinate
  Key minusOne{};  // p - 1
  minusOne.fill(0xff);
  minusOne[0] = 0xec;
  minusOne[31] = 0x7f;
  const Key orderEight = {0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3,
                          0xfa, 0xf1, 0x9f, 0xc4, 0x6a, 0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32,
                          0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00};
  for (const Key& key : {one, minusOne, orderEight}) {
    EndpointOptions options;
    std::copy(key.begin(), key.end(), options.serverPublicKey.begin());
    CHECK_THROWS_WITH(ValidateOptions(options), Contains("small order"));
  }
  EndpointOptions real;
  real.serverPublicKey = timerwheel::rudp::MakeServerKeyPair().publicKey;
  CHECK(ValidateOptions(real).serverPublicKey == real.serverPublicKey);
}

TEST_CASE(
    "the key-exchange shares default to a tenth and a quarter of the rate, and are refused above "
    "it or without one",
    "[options]") {
  const EndpointOptions defaults = ValidateOptions(EndpointOptions{});
  CHECK(defaults.keyExchangesPerAddressPerSecond == 1'000);
  CHECK(defaults.keyExchangesPerPrefixPerSecond == 2'500);

  EndpointOptions small;
  small.newConnectionsPerSecond = 3;  // shares of at least one
  CHECK(ValidateOptions(small).keyExchangesPerAddressPerSecond == 1);
  CHECK(ValidateOptions(small).keyExchangesPerPrefixPerSecond == 1);

  // What the caller set is kept, and a default never exceeds it (nor names an option the caller
  // did not set).
  EndpointOptions prefixOnly;
  prefixOnly.keyExchangesPerPrefixPerSecond = 400;
  CHECK(ValidateOptions(prefixOnly).keyExchangesPerAddressPerSecond == 400);
  EndpointOptions addressOnly;
  addressOnly.keyExchangesPerAddressPerSecond = 5'000;
  CHECK(ValidateOptions(addressOnly).keyExchangesPerPrefixPerSecond == 5'000);

  EndpointOptions overRate;
  overRate.keyExchangesPerAddressPerSecond = 10'001;
  CHECK_THROWS_WITH(ValidateOptions(overRate), Contains("keyExchangesPerAddressPerSecond"));
  overRate.keyExchangesPerAddressPerSecond = 0;
  overRate.keyExchangesPerPrefixPerSecond = 10'001;
  CHECK_THROWS_WITH(ValidateOptions(overRate), Contains("keyExchangesPerPrefixPerSecond"));
  EndpointOptions inverted;
  inverted.keyExchangesPerAddressPerSecond = 200;
  inverted.keyExchangesPerPrefixPerSecond = 100;
  CHECK_THROWS_WITH(ValidateOptions(inverted),
                    Contains("keyExchangesPerAddressPerSecond must be at most"));
  EndpointOptions unlimited;
  unlimited.newConnectionsPerSecond = 0;
  CHECK(ValidateOptions(unlimited).keyExchangesPerAddressPerSecond == 0);
  unlimited.keyExchangesPerAddressPerSecond = 10;
  CHECK_THROWS_WITH(ValidateOptions(unlimited), Contains("need newConnectionsPerSecond"));
}
