// LinkModel as the bottleneck the congestion-control benchmarks need (issue 17): a rate that
// changes mid-run, a deep queue, and two flows sharing one capped link, in virtual time.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "Relay/Detail/LinkModel.h"

using timerwheel::relay::ImpairmentProfile;
using timerwheel::relay::Microseconds;
using timerwheel::relay::detail::Deliveries;
using timerwheel::relay::detail::DropCause;
using timerwheel::relay::detail::LinkModel;

namespace {

constexpr std::uint64_t kSeed = 17;
constexpr Microseconds kStart = 1'000'000;
constexpr std::size_t kSize = 1250;  // 10 ms at 1 Mbit/s, 5 ms at 2 Mbit/s

Deliveries Arrive(LinkModel& model, Microseconds now, std::uint8_t flow = 0) {
  std::vector<std::uint8_t> bytes(kSize, flow);
  Deliveries out;
  model.OnArrival(now, bytes, out);
  return out;
}

}  // namespace

TEST_CASE(
    "LinkModel rate change mid-run: the queue drains at the old rate, later datagrams at "
    "the new",
    "[relay]") {
  ImpairmentProfile profile;
  profile.rateBitsPerSecond = 1e6;
  LinkModel model(profile, kSeed);
  // Four datagrams at once: they depart 10 ms apart, the last at +40 ms.
  for (Microseconds i = 1; i <= 4; ++i) REQUIRE(Arrive(model, kStart).at[0] == kStart + i * 10'000);
  profile.rateBitsPerSecond = 2e6;
  model.SetProfile(profile);
  // Already decided: unchanged. The next waits for the backlog, then takes 5 ms.
  CHECK(Arrive(model, kStart + 1'000).at[0] == kStart + 45'000);
  CHECK(model.BacklogBytes() == 5 * kSize);
  // Once the link is idle, datagrams go at the new rate.
  CHECK(Arrive(model, kStart + 100'000).at[0] == kStart + 105'000);

  SECTION("and back down") {
    profile.rateBitsPerSecond = 0.5e6;
    model.SetProfile(profile);
    CHECK(Arrive(model, kStart + 200'000).at[0] == kStart + 220'000);
  }
}

TEST_CASE("LinkModel deep queue: 1 MB at 50 Mbit/s holds 168 ms of traffic before dropping",
          "[relay]") {
  ImpairmentProfile profile;
  profile.rateBitsPerSecond = 50e6;
  profile.queueLimitBytes = 1 << 20;
  LinkModel model(profile, kSeed);
  std::size_t admitted = 0;
  Microseconds lastDeparture = 0;
  for (int i = 0; i < 1000; ++i) {
    const Deliveries d = Arrive(model, kStart);
    if (d.dropped != DropCause::None) continue;
    ++admitted;
    lastDeparture = d.at[0];
  }
  CHECK(admitted == (std::size_t{1} << 20) / kSize);  // 838 whole datagrams
  CHECK(model.Counters().droppedQueue == 1000 - admitted);
  // 838 x 1250 bytes at 6.25 MB/s: 167.6 ms of queueing delay for the last (whole microseconds).
  CHECK(lastDeparture - kStart == Approx(167'600).margin(1));
}

TEST_CASE("LinkModel shared by two flows: each gets the share it offers of the capped link",
          "[relay]") {
  // The relay runs every client's datagrams towards the server through one LinkModel, so flows
  // share the rate cap and the queue the way they would at a router's drop-tail queue.
  ImpairmentProfile profile;
  profile.rateBitsPerSecond = 1e6;  // 100 datagrams per second
  profile.queueLimitBytes = 10 * kSize;
  LinkModel model(profile, kSeed);
  std::uint64_t delivered[2] = {0, 0};
  std::uint64_t dropped[2] = {0, 0};
  // Flow 0 offers 100/s, flow 1 300/s, for 10 s (4x the link together), at random moments (a
  // periodic pattern would phase-lock with the link's departures and starve one flow).
  std::mt19937 random(kSeed);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::uint64_t offered[2] = {0, 0};
  for (Microseconds ms = 0; ms < 10'000; ++ms) {
    const Microseconds now = kStart + ms * 1'000;
    for (std::uint8_t flow = 0; flow < 2; ++flow) {
      if (uniform(random) >= (flow == 0 ? 0.1 : 0.3)) continue;
      ++offered[flow];
      if (Arrive(model, now, flow).dropped == DropCause::None) {
        ++delivered[flow];
      } else {
        ++dropped[flow];
      }
    }
  }
  // About 1000 departures in 10 s (plus the queue), shared as offered: the ratio within 15 %.
  CHECK(delivered[0] + delivered[1] == Approx(1000).margin(15));
  CHECK(static_cast<double>(delivered[1]) / static_cast<double>(delivered[0]) ==
        Approx(static_cast<double>(offered[1]) / static_cast<double>(offered[0])).epsilon(0.15));
  CHECK(dropped[0] > 0);
  CHECK(dropped[1] > 0);
}
