// ImpairmentProfile::Validate: the bounds that keep the relay's times inside its clock, and the
// burst loss that must have a way out of its bad state. The relay refuses what Validate refuses.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "Relay/ImpairmentProfile.h"
#include "Relay/ImpairmentRelay.h"

using Catch::Matchers::Contains;
using timerwheel::relay::ImpairmentProfile;
using timerwheel::relay::ImpairmentRelay;
using timerwheel::relay::Microseconds;
using Udp = boost::asio::ip::udp;

namespace {

constexpr Microseconds kMaxDelay = 1'000'000'000'000;  // 1e9 ms, as the CLI has always capped it

}  // namespace

TEST_CASE("ImpairmentProfile Validate rejects a rate below 1 bit/s and delays beyond 1e12 us",
          "[relay]") {
  ImpairmentProfile profile;
  // --rate-mbit 1e-12: a 1200-byte datagram would take 9.6e15 us, past int64 nanoseconds.
  profile.rateBitsPerSecond = 1e-6;
  CHECK_THAT(profile.Validate(), Contains("rateBitsPerSecond"));
  profile.rateBitsPerSecond = 0.999;
  CHECK_THAT(profile.Validate(), Contains("rateBitsPerSecond"));
  for (const double usable : {0.0, 1.0, 1e6, 1e12, 1e15}) {
    profile.rateBitsPerSecond = usable;
    INFO("rate " << usable);
    CHECK(profile.Validate().empty());
  }

  for (Microseconds ImpairmentProfile::*field :
       {&ImpairmentProfile::delay, &ImpairmentProfile::jitter, &ImpairmentProfile::reorderDelay}) {
    ImpairmentProfile timed;
    timed.*field = kMaxDelay;
    CHECK(timed.Validate().empty());
    timed.*field = kMaxDelay + 1;
    CHECK_THAT(timed.Validate(), Contains("1000000000000"));
    timed.*field = ~Microseconds{0};
    CHECK_FALSE(timed.Validate().empty());
  }

  // Unvalidated profiles (LinkModel takes any): the implied reorder delay, 2 x delay, never wraps.
  ImpairmentProfile huge;
  huge.delay = Microseconds{1} << 63;
  CHECK(huge.EffectiveReorderDelay() >= huge.delay);
}

TEST_CASE("ImpairmentProfile Validate rejects burst loss with no way out of the bad state",
          "[relay]") {
  ImpairmentProfile profile;
  profile.burstEnter = 0.01;  // burstExit left at its default, 0: once bad, bad for ever
  CHECK_THAT(profile.Validate(), Contains("burstExit"));
  profile.burstExit = 0.2;
  CHECK(profile.Validate().empty());
  profile.burstEnter = 0;
  profile.burstExit = 0;  // burst loss off
  CHECK(profile.Validate().empty());

  // The relay refuses it before it opens a socket.
  ImpairmentProfile endless;
  endless.burstEnter = 1;
  boost::asio::io_context io;
  const Udp::endpoint loopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);
  const Udp::endpoint upstream(boost::asio::ip::make_address_v4("127.0.0.1"), 9);
  CHECK_THROWS_AS(ImpairmentRelay(io, loopback, upstream, endless, {}, 1), std::invalid_argument);
  CHECK_THROWS_AS(ImpairmentRelay(io, loopback, upstream, {}, endless, 1), std::invalid_argument);
}
