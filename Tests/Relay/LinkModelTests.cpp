// LinkModel: the impairment relay's decisions, in virtual time and with fixed seeds. Statistical
// checks use tolerances of about five standard deviations, so with a fixed seed they are exact
// regressions and with another seed they would still hold.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "Relay/Detail/LinkModel.h"

using timerwheel::relay::ImpairmentProfile;
using timerwheel::relay::Microseconds;
using timerwheel::relay::detail::Deliveries;
using timerwheel::relay::detail::DropCause;
using timerwheel::relay::detail::LinkModel;

namespace {

constexpr std::uint64_t kSeed = 20240611;
constexpr Microseconds kStart = 1'000'000;

// A datagram whose bytes say where it came from: byte i = (index + i) mod 256.
std::vector<std::uint8_t> Datagram(std::size_t size, std::size_t index) {
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(index + i);
  return bytes;
}

Deliveries Arrive(LinkModel& model, Microseconds now, std::size_t size = 100,
                  std::size_t index = 0) {
  auto bytes = Datagram(size, index);
  Deliveries out;
  model.OnArrival(now, bytes, out);
  return out;
}

// |observed - n p| within `sigmas` binomial standard deviations.
bool WithinBinomial(std::uint64_t observed, std::uint64_t n, double p, double sigmas = 5) {
  const double mean = static_cast<double>(n) * p;
  const double deviation = std::sqrt(static_cast<double>(n) * p * (1 - p));
  return std::abs(static_cast<double>(observed) - mean) <= sigmas * deviation;
}

}  // namespace

TEST_CASE("LinkModel without impairment delivers everything at once", "[relay]") {
  LinkModel model({}, kSeed);
  for (Microseconds i = 0; i < 1000; ++i) {
    const Deliveries d = Arrive(model, kStart + i);
    REQUIRE(d.dropped == DropCause::None);
    REQUIRE(d.count == 1);
    REQUIRE(d.at[0] == kStart + i);
    REQUIRE_FALSE(d.corrupted);
  }
  const auto& c = model.Counters();
  CHECK(c.in == 1000);
  CHECK(c.out == 1000);
  CHECK(c.bytesIn == 100'000);
  CHECK(c.bytesOut == 100'000);
  CHECK(c.droppedLoss + c.droppedBurst + c.droppedQueue + c.duplicated + c.reordered +
            c.corrupted ==
        0);
}

TEST_CASE("LinkModel Bernoulli loss rate is within binomial tolerance", "[relay]") {
  constexpr std::uint64_t kPackets = 100'000;
  for (const double p : {0.01, 0.1, 0.3}) {
    ImpairmentProfile profile;
    profile.loss = p;
    LinkModel model(profile, kSeed);
    std::uint64_t lost = 0;
    for (std::uint64_t i = 0; i < kPackets; ++i) {
      const Deliveries d = Arrive(model, kStart + i);
      if (d.dropped != DropCause::None) {
        REQUIRE(d.dropped == DropCause::Loss);
        REQUIRE(d.count == 0);
        ++lost;
      }
    }
    INFO("p = " << p << ", lost " << lost);
    CHECK(WithinBinomial(lost, kPackets, p));
    CHECK(model.Counters().droppedLoss == lost);
    CHECK(model.Counters().out == kPackets - lost);
  }
}

TEST_CASE("LinkModel Gilbert-Elliott bursts have mean length 1 over exit", "[relay]") {
  constexpr std::uint64_t kPackets = 200'000;
  ImpairmentProfile profile;
  profile.burstEnter = 0.01;
  profile.burstExit = 0.2;  // mean burst 5 datagrams
  profile.burstLoss = 1;
  LinkModel model(profile, kSeed);
  std::uint64_t lost = 0, bursts = 0, run = 0;
  for (std::uint64_t i = 0; i < kPackets; ++i) {
    const Deliveries d = Arrive(model, kStart + i);
    if (d.dropped != DropCause::None) {
      REQUIRE(d.dropped == DropCause::Burst);
      ++lost;
      if (run++ == 0) ++bursts;
    } else {
      run = 0;
    }
  }
  const double meanBurst = static_cast<double>(lost) / static_cast<double>(bursts);
  const double lossRate = static_cast<double>(lost) / kPackets;
  const double expectedLoss = profile.burstEnter / (profile.burstEnter + profile.burstExit);
  INFO("bursts " << bursts << ", mean burst " << meanBurst << ", loss " << lossRate);
  CHECK(bursts > 1000);
  CHECK(std::abs(meanBurst - 1 / profile.burstExit) < 0.5);        // standard error ~0.1
  CHECK(std::abs(lossRate - expectedLoss) < 0.15 * expectedLoss);  // standard error ~3 %
  CHECK(model.Counters().droppedBurst == lost);
  CHECK(model.Counters().droppedLoss == 0);
}

TEST_CASE("LinkModel delay without jitter is exact", "[relay]") {
  ImpairmentProfile profile;
  profile.delay = 20'000;
  LinkModel model(profile, kSeed);
  for (Microseconds now = kStart; now < kStart + 1'000'000; now += 777) {
    const Deliveries d = Arrive(model, now);
    REQUIRE(d.count == 1);
    REQUIRE(d.at[0] == now + 20'000);
  }
}

TEST_CASE("LinkModel jitter keeps FIFO unless it may reorder", "[relay]") {
  ImpairmentProfile profile;
  profile.delay = 10'000;
  profile.jitter = 5'000;
  constexpr int kPackets = 10'000;

  SECTION("jitterReorders false: deliveries never go backwards") {
    LinkModel model(profile, kSeed);
    Microseconds previous = 0;
    bool sawJitter = false;
    for (int i = 0; i < kPackets; ++i) {
      const Microseconds now = kStart + 100 * static_cast<Microseconds>(i);
      const Deliveries d = Arrive(model, now);
      REQUIRE(d.count == 1);
      REQUIRE(d.at[0] >= previous);
      REQUIRE(d.at[0] >= now + profile.delay);
      REQUIRE(d.at[0] <= std::max(previous, now + profile.delay + profile.jitter));
      sawJitter = sawJitter || d.at[0] > now + profile.delay;
      previous = d.at[0];
    }
    CHECK(sawJitter);
    CHECK(model.Counters().reordered == 0);
  }
  SECTION("jitterReorders true: datagrams overtake each other within the jitter") {
    profile.jitterReorders = true;
    LinkModel model(profile, kSeed);
    Microseconds previous = 0;
    int inversions = 0;
    for (int i = 0; i < kPackets; ++i) {
      const Microseconds now = kStart + 100 * static_cast<Microseconds>(i);
      const Deliveries d = Arrive(model, now);
      REQUIRE(d.at[0] >= now + profile.delay);
      REQUIRE(d.at[0] <= now + profile.delay + profile.jitter);
      if (d.at[0] < previous) ++inversions;
      previous = d.at[0];
    }
    INFO("inversions " << inversions);
    CHECK(inversions > kPackets / 4);  // arrivals 0.1 ms apart, jitter 5 ms: most are
  }
}

TEST_CASE("LinkModel explicit reordering holds datagrams back", "[relay]") {
  constexpr std::uint64_t kPackets = 100'000;
  ImpairmentProfile profile;
  profile.delay = 1'000;
  profile.reorder = 0.05;
  REQUIRE(profile.EffectiveReorderDelay() == 2'000);
  LinkModel model(profile, kSeed);
  std::uint64_t held = 0, overtaken = 0;
  Microseconds heldUntil = 0;
  for (std::uint64_t i = 0; i < kPackets; ++i) {
    const Microseconds now = kStart + 10 * i;
    const Deliveries d = Arrive(model, now);
    REQUIRE(d.count == 1);
    if (d.reordered[0]) {
      ++held;
      REQUIRE(d.at[0] == now + 3'000);
      heldUntil = d.at[0];
    } else {
      REQUIRE(d.at[0] == now + 1'000);  // a held-back datagram does not delay the others
      if (d.at[0] < heldUntil) ++overtaken;
    }
  }
  CHECK(WithinBinomial(held, kPackets, profile.reorder));
  CHECK(model.Counters().reordered == held);
  CHECK(overtaken > held);  // each held datagram is overtaken by the next ~200

  ImpairmentProfile noDelay;
  noDelay.reorder = 1;
  CHECK(noDelay.EffectiveReorderDelay() == 5'000);
  LinkModel always(noDelay, kSeed);
  CHECK(Arrive(always, kStart).at[0] == kStart + 5'000);
  noDelay.reorderDelay = 700;
  always.SetProfile(noDelay);
  CHECK(Arrive(always, kStart + 1).at[0] == kStart + 701);
}

TEST_CASE("LinkModel duplicates and corrupts at the configured rates", "[relay]") {
  constexpr std::uint64_t kPackets = 100'000;
  constexpr std::size_t kSize = 64;
  ImpairmentProfile profile;
  profile.duplicate = 0.02;
  profile.corrupt = 0.03;
  LinkModel model(profile, kSeed);
  std::uint64_t duplicated = 0, corrupted = 0;
  for (std::uint64_t i = 0; i < kPackets; ++i) {
    const auto original = Datagram(kSize, i);
    auto bytes = original;
    Deliveries d;
    model.OnArrival(kStart + i, bytes, d);
    REQUIRE(d.dropped == DropCause::None);
    REQUIRE(d.count == (d.duplicated ? 2u : 1u));
    for (std::size_t copy = 0; copy < d.count; ++copy) REQUIRE(d.at[copy] == kStart + i);
    if (d.duplicated) ++duplicated;
    std::size_t changed = 0;
    for (std::size_t b = 0; b < kSize; ++b) changed += bytes[b] != original[b] ? 1 : 0;
    REQUIRE(changed == (d.corrupted ? 1u : 0u));  // exactly one byte, to a different value
    if (d.corrupted) ++corrupted;
  }
  CHECK(WithinBinomial(duplicated, kPackets, profile.duplicate));
  CHECK(WithinBinomial(corrupted, kPackets, profile.corrupt));
  const auto& c = model.Counters();
  CHECK(c.duplicated == duplicated);
  CHECK(c.corrupted == corrupted);
  CHECK(c.out == kPackets + duplicated);
  CHECK(c.bytesOut == (kPackets + duplicated) * kSize);

  // An empty datagram has nothing to corrupt.
  profile.corrupt = 1;
  model.SetProfile(profile);
  std::vector<std::uint8_t> empty;
  Deliveries d;
  model.OnArrival(kStart + kPackets, empty, d);
  CHECK_FALSE(d.corrupted);
}

TEST_CASE("LinkModel rate cap serializes datagrams and drops at the queue limit", "[relay]") {
  constexpr std::size_t kSize = 1250;  // 10 ms at 1 Mbit/s
  ImpairmentProfile profile;
  profile.rateBitsPerSecond = 1e6;

  SECTION("unlimited queue: 100 datagrams arriving at once depart 10 ms apart") {
    profile.delay = 5'000;
    LinkModel model(profile, kSeed);
    for (Microseconds i = 0; i < 100; ++i) {
      const Deliveries d = Arrive(model, kStart, kSize);
      REQUIRE(d.count == 1);
      REQUIRE(d.at[0] == kStart + 10'000 * (i + 1) + 5'000);
    }
    CHECK(model.BacklogBytes() == 100 * kSize);
    // The link is busy until kStart + 1 s: a datagram arriving then waits its own 10 ms only.
    CHECK(Arrive(model, kStart + 1'000'000, kSize).at[0] == kStart + 1'015'000);
    CHECK(model.BacklogBytes() == kSize);
    CHECK(model.Counters().droppedQueue == 0);
  }
  SECTION("queueLimitBytes 12500: only 10 are queued and the rest are dropped") {
    profile.queueLimitBytes = 12'500;
    LinkModel model(profile, kSeed);
    std::uint64_t delivered = 0;
    for (int i = 0; i < 100; ++i) {
      const Deliveries d = Arrive(model, kStart, kSize);
      if (d.dropped == DropCause::None) {
        ++delivered;
        REQUIRE(d.at[0] == kStart + 10'000 * delivered);
      } else {
        REQUIRE(d.dropped == DropCause::Queue);
      }
    }
    CHECK(delivered == 10);
    CHECK(model.Counters().droppedQueue == 90);
    CHECK(model.BacklogBytes() == 12'500);
    // Once the first has departed there is room for exactly one more.
    CHECK(Arrive(model, kStart + 10'000, kSize).dropped == DropCause::None);
    CHECK(Arrive(model, kStart + 10'000, kSize).dropped == DropCause::Queue);
    CHECK(Arrive(model, kStart + 200'000, kSize).at[0] == kStart + 210'000);  // drained
  }
}

TEST_CASE("LinkModel saturates its times at 2^52 us instead of overflowing", "[relay]") {
  // The relay adds these times to a steady_clock time point (int64 nanoseconds): whatever the
  // profile (LinkModel does not validate it), no time may get near that clock's end, wrap, or
  // come from a double too large for Microseconds.
  constexpr Microseconds kLatest = Microseconds{1} << 52;  // 142.7 years
  const auto clockEnd =
      static_cast<Microseconds>(std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::steady_clock::duration::max())
                                    .count());
  REQUIRE(kLatest < clockEnd / 2);

  SECTION("a tiny rate: the link stays busy until the end of time") {
    ImpairmentProfile profile;
    profile.rateBitsPerSecond = 1e-6;  // --rate-mbit 1e-12: 1200 bytes take 9.6e15 us
    LinkModel model(profile, kSeed);
    const Deliveries first = Arrive(model, kStart, 1200);
    REQUIRE(first.count == 1);
    CHECK(first.at[0] == kLatest);
    CHECK(Arrive(model, kStart + 1, 1200).at[0] == kLatest);  // still busy, not wrapped
    profile.rateBitsPerSecond = 1e-300;  // the transmission time is +infinity as a double
    model.SetProfile(profile);
    CHECK(Arrive(model, kStart + 2, 1200).at[0] == kLatest);
    CHECK(model.BacklogBytes() == 3 * 1200);
  }
  SECTION("delay, jitter and reorder delay near 2^64") {
    ImpairmentProfile profile;
    profile.delay = ~Microseconds{0} - 5;
    LinkModel model(profile, kSeed);
    CHECK(Arrive(model, kStart).at[0] == kLatest);
    profile.delay = 0;
    profile.jitter = ~Microseconds{0};
    profile.jitterReorders = true;
    model.SetProfile(profile);
    for (Microseconds i = 0; i < 100; ++i) {
      const Microseconds at = Arrive(model, kStart + i).at[0];
      REQUIRE(at >= kStart + i);
      REQUIRE(at <= kLatest);
    }
    profile.jitter = 0;
    profile.reorder = 1;
    profile.reorderDelay = ~Microseconds{0};
    model.SetProfile(profile);
    CHECK(Arrive(model, kStart + 200).at[0] == kLatest);
    profile.reorderDelay = 0;
    profile.delay = Microseconds{1} << 63;  // the implied reorder delay, 2 x delay, was 0
    model.SetProfile(profile);
    CHECK(Arrive(model, kStart + 300).at[0] == kLatest);
  }
}

TEST_CASE("LinkModel with the same seed makes the same decisions", "[relay]") {
  ImpairmentProfile profile;
  profile.loss = 0.05;
  profile.burstEnter = 0.02;
  profile.burstExit = 0.3;
  profile.burstLoss = 0.8;
  profile.delay = 3'000;
  profile.jitter = 2'000;
  profile.reorder = 0.05;
  profile.duplicate = 0.05;
  profile.corrupt = 0.05;
  profile.rateBitsPerSecond = 20e6;
  profile.queueLimitBytes = 30'000;

  const auto run = [&](std::uint64_t seed) {
    LinkModel model(profile, seed);
    std::vector<Microseconds> trace;
    for (std::size_t i = 0; i < 20'000; ++i) {
      const std::size_t size = 100 + (i * 37) % 1100;
      auto bytes = Datagram(size, i);
      Deliveries d;
      model.OnArrival(kStart + 50 * i, bytes, d);
      trace.push_back(static_cast<Microseconds>(d.dropped));
      for (std::size_t copy = 0; copy < d.count; ++copy) trace.push_back(d.at[copy]);
      for (std::size_t b = 0; b < size; ++b) {
        if (bytes[b] != static_cast<std::uint8_t>(i + b)) trace.push_back(b);
      }
    }
    return trace;
  };
  const auto first = run(kSeed);
  CHECK(first == run(kSeed));
  CHECK(first != run(kSeed + 1));
}
