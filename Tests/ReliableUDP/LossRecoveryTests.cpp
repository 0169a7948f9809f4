// LossRecovery against RFC 9002: RTT estimation, loss detection, PTO, NewReno and pacing; and
// against RFC 9406: HyStart++ in the initial slow start.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <vector>

#include "ReliableUDP/Detail/LossRecovery.h"
#include "ReliableUDP/Detail/NewReno.h"

using namespace timerwheel::rudp::detail;

namespace {

constexpr std::uint32_t kMds = 1200;

struct RecordingFate final : IPacketFate {
  std::vector<PacketNumber> acked;
  std::vector<PacketNumber> lost;
  void OnPacketAcked(const SentPacket& packet) override { acked.push_back(packet.packetNumber); }
  void OnPacketLost(const SentPacket& packet) override { lost.push_back(packet.packetNumber); }
};

SentPacket Packet(PacketNumber pn, Microseconds timeSent, bool ackEliciting = true,
                  std::uint32_t size = kMds) {
  SentPacket packet;
  packet.packetNumber = pn;
  packet.timeSent = timeSent;
  packet.size = size;
  packet.ackEliciting = ackEliciting;
  return packet;
}

// Ranges are inclusive {smallest, largest}, listed descending as on the wire.
AckFrame Ack(std::initializer_list<AckRange> ranges, Microseconds ackDelay = 0) {
  AckFrame frame;
  for (const AckRange& range : ranges) frame.ranges[frame.rangeCount++] = range;
  frame.largest = frame.ranges[0].largest;
  frame.ackDelayMicroseconds = ackDelay;
  return frame;
}

LossRecoveryOptions Options(bool congestionControl = true, bool pacing = true) {
  LossRecoveryOptions options;
  options.maxDatagramSize = kMds;
  options.congestionControl = congestionControl;
  options.pacing = pacing;
  return options;
}

// Sends one packet at `sent` and acks it alone at `acked`: one RTT sample of acked - sent.
void Sample(LossRecovery& recovery, RecordingFate& fate, PacketNumber pn, Microseconds sent,
            Microseconds acked, Microseconds ackDelay = 0) {
  recovery.OnPacketSent(Packet(pn, sent));
  REQUIRE(recovery.OnAckReceived(Ack({{pn, pn}}, ackDelay), acked, fate) ==
          LossRecovery::AckResult::Ok);
}

}  // namespace

TEST_CASE("LossRecovery first RTT sample sets smoothed to the sample and variation to half",
          "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  recovery.SetPeerMaxAckDelay(25000);
  CHECK(recovery.Statistics().smoothedRtt == 0);
  // The ack delay is not subtracted from the first sample (RFC 9002 5.3).
  Sample(recovery, fate, 0, 1000, 101000, 5000);
  const LossRecoveryStatistics s = recovery.Statistics();
  CHECK(s.latestRtt == 100000);
  CHECK(s.minRtt == 100000);
  CHECK(s.smoothedRtt == 100000);
  CHECK(s.rttVariation == 50000);
  CHECK(fate.acked == std::vector<PacketNumber>{0});
}

TEST_CASE("LossRecovery later RTT samples use gains of 1/8 and 1/4 with a capped ack delay",
          "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  recovery.SetPeerMaxAckDelay(25000);
  Sample(recovery, fate, 0, 0, 100000);

  // latest 140000, delay 10000 subtracted: adjusted 130000.
  Sample(recovery, fate, 1, 200000, 340000, 10000);
  CHECK(recovery.Statistics().latestRtt == 140000);
  CHECK(recovery.Statistics().rttVariation == (3 * 50000 + 30000) / 4);   // 45000
  CHECK(recovery.Statistics().smoothedRtt == (7 * 100000 + 130000) / 8);  // 103750

  // The reported delay of 100 ms is capped at the peer's 25 ms: adjusted 160000 - 25000.
  Sample(recovery, fate, 2, 400000, 560000, 100000);
  CHECK(recovery.Statistics().latestRtt == 160000);
  CHECK(recovery.Statistics().rttVariation == (3 * 45000 + 31250) / 4);   // 41562
  CHECK(recovery.Statistics().smoothedRtt == (7 * 103750 + 135000) / 8);  // 107656

  // Subtracting 20 ms would take 110 ms below the 100 ms minimum: the delay is ignored.
  Sample(recovery, fate, 3, 600000, 710000, 20000);
  CHECK(recovery.Statistics().minRtt == 100000);
  CHECK(recovery.Statistics().rttVariation == (3 * 41562 + (110000 - 107656)) / 4);  // 31757
  CHECK(recovery.Statistics().smoothedRtt == (7 * 107656 + 110000) / 8);             // 107949

  // A smaller sample lowers the minimum.
  Sample(recovery, fate, 4, 800000, 880000);
  CHECK(recovery.Statistics().minRtt == 80000);
  CHECK(recovery.Statistics().latestRtt == 80000);
}

TEST_CASE("LossRecovery takes no RTT sample from a non-ack-eliciting or already acked largest",
          "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  recovery.OnPacketSent(Packet(0, 0));
  recovery.OnPacketSent(Packet(1, 10000, false));  // ACK-only
  REQUIRE(recovery.OnAckReceived(Ack({{0, 1}}), 50000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().smoothedRtt == 0);
  CHECK(fate.acked == std::vector<PacketNumber>{0});  // ACK-only packets are not tracked

  Sample(recovery, fate, 2, 60000, 100000);
  CHECK(recovery.Statistics().latestRtt == 40000);
  // The same ACK again, later: nothing new, no sample.
  REQUIRE(recovery.OnAckReceived(Ack({{0, 2}}), 900000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().latestRtt == 40000);
  CHECK(recovery.Statistics().smoothedRtt == 40000);
}

TEST_CASE("LossRecovery packet threshold then time threshold through the timer", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 5; ++pn) recovery.OnPacketSent(Packet(pn, pn * 1000));
  // Sample 47000: loss delay 9/8 * 47000 = 52875.
  REQUIRE(recovery.OnAckReceived(Ack({{3, 3}}), 50000, fate) == LossRecovery::AckResult::Ok);
  CHECK(fate.lost == std::vector<PacketNumber>{0});  // 3 >= 0 + kPacketThreshold
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(1000 + 52875));
  CHECK(recovery.Statistics().bytesInFlight == 3 * kMds);  // 1, 2 and 4

  CHECK(recovery.OnLossDetectionTimeout(53874, fate) == 0);  // early: nothing happens
  CHECK(fate.lost.size() == 1);
  CHECK(recovery.OnLossDetectionTimeout(53875, fate) == 0);
  CHECK(fate.lost == std::vector<PacketNumber>{0, 1});
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(2000 + 52875));
  CHECK(recovery.OnLossDetectionTimeout(54875, fate) == 0);
  CHECK(fate.lost == std::vector<PacketNumber>{0, 1, 2});
  CHECK(recovery.Statistics().packetsLost == 3);
  CHECK(recovery.Statistics().probeTimeouts == 0);
  // Only packet 4 is left: the timer is the PTO from its send time.
  CHECK(recovery.Statistics().bytesInFlight == kMds);
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(4000 + 47000 + 4 * 23500));
}

TEST_CASE("LossRecovery time threshold declares an old packet lost at once", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  recovery.OnPacketSent(Packet(0, 0));
  recovery.OnPacketSent(Packet(1, 100000));
  // Sample 50000: loss delay 56250; packet 0 was sent 150000 ago.
  REQUIRE(recovery.OnAckReceived(Ack({{1, 1}}), 150000, fate) == LossRecovery::AckResult::Ok);
  CHECK(fate.lost == std::vector<PacketNumber>{0});
  CHECK(fate.acked == std::vector<PacketNumber>{1});
  CHECK_FALSE(recovery.LossDetectionDeadline().has_value());
  CHECK_FALSE(recovery.HasAckElicitingInFlight());
}

TEST_CASE("LossRecovery in-order acks lose nothing", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 10; ++pn) recovery.OnPacketSent(Packet(pn, pn * 1000));
  for (PacketNumber pn = 0; pn < 10; ++pn) {
    REQUIRE(recovery.OnAckReceived(Ack({{0, pn}}), 30000 + pn * 1000, fate) ==
            LossRecovery::AckResult::Ok);
  }
  CHECK(fate.lost.empty());
  CHECK(fate.acked.size() == 10);
  CHECK(recovery.Statistics().packetsAcked == 10);
  CHECK(recovery.Statistics().bytesInFlight == 0);
  CHECK_FALSE(recovery.LossDetectionDeadline().has_value());
  CHECK(recovery.RecordCount() == 0);
}

TEST_CASE("LossRecovery PTO before and after the first sample with backoff, cap and reset",
          "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  CHECK_FALSE(recovery.LossDetectionDeadline().has_value());
  CHECK(recovery.OnLossDetectionTimeout(5000000, fate) == 0);  // nothing in flight

  recovery.OnPacketSent(Packet(0, 1000));
  CHECK(recovery.ProbeTimeout() == kInitialPto);
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(1000 + kInitialPto));
  CHECK(recovery.OnLossDetectionTimeout(1000 + kInitialPto - 1, fate) == 0);
  CHECK(recovery.Statistics().probeTimeouts == 0);

  // First PTO: one probe; the next deadline is doubled.
  CHECK(recovery.OnLossDetectionTimeout(1000 + kInitialPto, fate) == 1);
  CHECK(recovery.Statistics().probeTimeouts == 1);
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(1000 + 2 * kInitialPto));
  // The caller sends the probe: the timer counts from it.
  const Microseconds probeSent = 1000 + kInitialPto;
  recovery.OnPacketSent(Packet(1, probeSent));
  CHECK(recovery.LossDetectionDeadline() ==
        std::optional<Microseconds>(probeSent + 2 * kInitialPto));
  CHECK(recovery.OnLossDetectionTimeout(probeSent + 2 * kInitialPto, fate) == 2);
  CHECK(recovery.LossDetectionDeadline() ==
        std::optional<Microseconds>(probeSent + 4 * kInitialPto));

  // Backoff caps at 2^kMaxPtoBackoff.
  Microseconds now = 0;
  for (unsigned pto = 3; pto <= kMaxPtoBackoff + 3; ++pto) {
    now = *recovery.LossDetectionDeadline();
    CHECK(recovery.OnLossDetectionTimeout(now, fate) == 2);
  }
  CHECK(recovery.Statistics().probeTimeouts == kMaxPtoBackoff + 3);
  CHECK(recovery.LossDetectionDeadline() ==
        std::optional<Microseconds>(probeSent + (kInitialPto << kMaxPtoBackoff)));
  CHECK(fate.lost.empty());  // a PTO declares nothing lost

  // An ACK resets the backoff; with a sample, PTO = srtt + max(4 * rttvar, g) + max ack delay.
  recovery.SetPeerMaxAckDelay(25000);
  recovery.OnPacketSent(Packet(2, now));
  REQUIRE(recovery.OnAckReceived(Ack({{2, 2}}), now + 100000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.ProbeTimeout() == 100000 + 4 * 50000 + 25000);
  CHECK(fate.lost == std::vector<PacketNumber>{0, 1});  // long past the time threshold
  CHECK_FALSE(recovery.LossDetectionDeadline().has_value());
  now += 100010;
  recovery.OnPacketSent(Packet(3, now));
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(now + 325000));
  CHECK(recovery.OnLossDetectionTimeout(now + 325000, fate) == 1);  // the backoff was reset
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(now + 2 * 325000));
}

TEST_CASE("LossRecovery PTO has a floor of the timer granularity", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  Sample(recovery, fate, 0, 0, 100);
  CHECK(recovery.ProbeTimeout() == 100 + kTimerGranularity);
  recovery.OnPacketSent(Packet(1, 200));
  CHECK(recovery.LossDetectionDeadline() == std::optional<Microseconds>(200 + 100 + 1000));
}

TEST_CASE("LossRecovery rejects an ACK of an unsent packet and changes nothing", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  CHECK(recovery.OnAckReceived(Ack({{0, 0}}), 1000, fate) ==
        LossRecovery::AckResult::AckedUnsentPacket);
  for (PacketNumber pn = 0; pn < 3; ++pn) recovery.OnPacketSent(Packet(pn, pn * 100));
  const LossRecoveryStatistics before = recovery.Statistics();
  const std::optional<Microseconds> deadline = recovery.LossDetectionDeadline();
  CHECK(recovery.OnAckReceived(Ack({{0, 3}}), 50000, fate) ==
        LossRecovery::AckResult::AckedUnsentPacket);
  CHECK(recovery.OnAckReceived(Ack({{5, 1000}, {0, 2}}), 50000, fate) ==
        LossRecovery::AckResult::AckedUnsentPacket);
  CHECK(fate.acked.empty());
  CHECK(fate.lost.empty());
  const LossRecoveryStatistics after = recovery.Statistics();
  CHECK(after.bytesInFlight == before.bytesInFlight);
  CHECK(after.congestionWindow == before.congestionWindow);
  CHECK(after.packetsAcked == 0);
  CHECK(after.smoothedRtt == 0);
  CHECK(recovery.LossDetectionDeadline() == deadline);
  // The honest ACK still works afterwards.
  CHECK(recovery.OnAckReceived(Ack({{0, 2}}), 50000, fate) == LossRecovery::AckResult::Ok);
  CHECK(fate.acked == std::vector<PacketNumber>{0, 1, 2});
}

TEST_CASE("LossRecovery duplicate and overlapping ACK frames are idempotent", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 10; ++pn) recovery.OnPacketSent(Packet(pn, pn * 100));
  REQUIRE(recovery.OnAckReceived(Ack({{0, 5}}), 20000, fate) == LossRecovery::AckResult::Ok);
  const AckFrame overlapping = Ack({{7, 7}, {3, 5}, {0, 1}});
  REQUIRE(recovery.OnAckReceived(overlapping, 20100, fate) == LossRecovery::AckResult::Ok);
  REQUIRE(recovery.OnAckReceived(overlapping, 20200, fate) == LossRecovery::AckResult::Ok);
  REQUIRE(recovery.OnAckReceived(Ack({{0, 5}}), 20300, fate) == LossRecovery::AckResult::Ok);
  CHECK(fate.acked == std::vector<PacketNumber>{0, 1, 2, 3, 4, 5, 7});
  CHECK(fate.lost.empty());  // 6 is only 1 below the largest
  const LossRecoveryStatistics s = recovery.Statistics();
  CHECK(s.packetsAcked == 7);
  CHECK(s.bytesInFlight == 3 * kMds);
  CHECK(s.latestRtt == 20100 - 700);  // the second frame's sample only
}

TEST_CASE("LossRecovery counts a spurious loss when a lost packet is acked later", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 5; ++pn) recovery.OnPacketSent(Packet(pn, pn * 1000));
  REQUIRE(recovery.OnAckReceived(Ack({{3, 3}}), 50000, fate) == LossRecovery::AckResult::Ok);
  REQUIRE(fate.lost == std::vector<PacketNumber>{0});
  const std::uint64_t inFlight = recovery.Statistics().bytesInFlight;
  REQUIRE(recovery.OnAckReceived(Ack({{3, 4}, {0, 0}}), 51000, fate) ==
          LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().spuriousLosses == 1);
  CHECK(fate.acked == std::vector<PacketNumber>{3, 4, 0});
  CHECK(fate.lost == std::vector<PacketNumber>{0, 1});  // 4 >= 1 + 3
  // Packets 4 (acked) and 1 (lost) left flight; 0 had left it already.
  CHECK(recovery.Statistics().bytesInFlight == inFlight - 2 * kMds);
  // Acked again: no second count.
  REQUIRE(recovery.OnAckReceived(Ack({{3, 4}, {0, 0}}), 52000, fate) ==
          LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().spuriousLosses == 1);
}

TEST_CASE("LossRecovery NewReno initial window follows RFC 9002 7.2", "[rudp][loss]") {
  CHECK(LossRecovery(Options()).Statistics().congestionWindow == 12000);
  LossRecoveryOptions options = Options();
  options.maxDatagramSize = 1500;
  CHECK(LossRecovery(options).Statistics().congestionWindow == 14720);
  options.maxDatagramSize = 9000;
  CHECK(LossRecovery(options).Statistics().congestionWindow == 18000);
}

TEST_CASE("LossRecovery slow start doubles a fully used window per round trip", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 10; ++pn) {
    REQUIRE(recovery.CanSend(kMds));
    recovery.OnPacketSent(Packet(pn, 0));
  }
  CHECK_FALSE(recovery.CanSend(1));
  REQUIRE(recovery.OnAckReceived(Ack({{0, 9}}), 100000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().congestionWindow == 24000);
  CHECK(recovery.CanSend(24000));
  CHECK_FALSE(recovery.CanSend(24001));
}

TEST_CASE("LossRecovery does not grow a window the sender leaves unused", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 20; ++pn) {
    recovery.OnPacketSent(Packet(pn, pn * 100000));
    REQUIRE(recovery.OnAckReceived(Ack({{0, pn}}), pn * 100000 + 50000, fate) ==
            LossRecovery::AckResult::Ok);
  }
  CHECK(recovery.Statistics().congestionWindow == 12000);
}

TEST_CASE("LossRecovery reduces once per round trip for several losses in one flight",
          "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 10; ++pn) recovery.OnPacketSent(Packet(pn, pn * 1000));
  // 0..2 lost by count: the first congestion event, recovery starts at 100000.
  REQUIRE(recovery.OnAckReceived(Ack({{4, 5}}), 100000, fate) == LossRecovery::AckResult::Ok);
  CHECK(fate.lost == std::vector<PacketNumber>{0, 1, 2});
  CHECK(recovery.Statistics().congestionWindow == 6000);
  CHECK(recovery.Statistics().congestionEvents == 1);
  // 3 and 6 lost too, but they were sent before the recovery started: no second reduction, and
  // acked packets from before the recovery do not grow the window.
  REQUIRE(recovery.OnAckReceived(Ack({{8, 9}, {4, 5}}), 101000, fate) ==
          LossRecovery::AckResult::Ok);
  CHECK(fate.lost == std::vector<PacketNumber>{0, 1, 2, 3, 6});
  CHECK(recovery.Statistics().congestionWindow == 6000);
  CHECK(recovery.Statistics().congestionEvents == 1);
  CHECK(recovery.Statistics().packetsLost == 5);
  CHECK(recovery.Statistics().bytesInFlight == kMds);  // packet 7

  // A loss from the next flight reduces again.
  for (PacketNumber pn = 10; pn < 14; ++pn) recovery.OnPacketSent(Packet(pn, 102000));
  REQUIRE(recovery.OnAckReceived(Ack({{13, 13}, {8, 9}, {4, 5}}), 200000, fate) ==
          LossRecovery::AckResult::Ok);
  CHECK(fate.lost.back() == 10);
  CHECK(recovery.Statistics().congestionWindow == 3000);
  CHECK(recovery.Statistics().congestionEvents == 2);
  // Never below the minimum window.
  for (PacketNumber pn = 14; pn < 18; ++pn) recovery.OnPacketSent(Packet(pn, 201000));
  REQUIRE(recovery.OnAckReceived(Ack({{17, 17}, {13, 13}}), 300000, fate) ==
          LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().congestionEvents == 3);
  CHECK(recovery.Statistics().congestionWindow == 2 * kMds);
}

TEST_CASE("LossRecovery persistent congestion collapses the window to the minimum",
          "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  Sample(recovery, fate, 0, 0, 100000);  // srtt 100 ms, rttvar 50 ms
  const Microseconds sent[] = {200000, 400000, 600000, 800000, 1100000};
  for (PacketNumber pn = 1; pn <= 5; ++pn) recovery.OnPacketSent(Packet(pn, sent[pn - 1]));
  recovery.OnPacketSent(Packet(6, 1150000));

  SECTION("lost packets spanning more than 3 PTOs") {
    recovery.OnPacketSent(Packet(7, 1200000));
    // The new sample leaves srtt 100 ms, rttvar 37.5 ms: PTO 250 ms, 3 PTOs 750 ms < 900 ms.
    REQUIRE(recovery.OnAckReceived(Ack({{6, 6}}), 1250000, fate) == LossRecovery::AckResult::Ok);
    CHECK(fate.lost == std::vector<PacketNumber>{1, 2, 3, 4, 5});
    CHECK(recovery.Statistics().persistentCongestion == 1);
    CHECK(recovery.Statistics().congestionEvents == 1);
    CHECK(recovery.Statistics().congestionWindow == 2 * kMds);
    // RFC 9002 B.8 ends the recovery period: packet 7, sent before the collapse, grows the window.
    REQUIRE(recovery.OnAckReceived(Ack({{6, 7}}), 1300000, fate) == LossRecovery::AckResult::Ok);
    CHECK(recovery.Statistics().congestionWindow == 3 * kMds);
  }
  SECTION("an acked packet sent in between prevents it") {
    REQUIRE(recovery.OnAckReceived(Ack({{6, 6}, {3, 3}}), 1250000, fate) ==
            LossRecovery::AckResult::Ok);
    CHECK(fate.lost == std::vector<PacketNumber>{1, 2, 4, 5});
    CHECK(recovery.Statistics().persistentCongestion == 0);
    CHECK(recovery.Statistics().congestionWindow == 6000);
  }
  SECTION("a span shorter than 3 PTOs is an ordinary loss") {
    recovery.SetPeerMaxAckDelay(100000);  // PTO 350 ms: 3 PTOs 1050 ms > 900 ms
    REQUIRE(recovery.OnAckReceived(Ack({{6, 6}}), 1250000, fate) == LossRecovery::AckResult::Ok);
    CHECK(fate.lost.size() == 5);
    CHECK(recovery.Statistics().persistentCongestion == 0);
    CHECK(recovery.Statistics().congestionWindow == 6000);
  }
}

TEST_CASE("LossRecovery persistent congestion needs packets sent after the first RTT sample",
          "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  // Sent long apart before any sample; the first sample arrives with their loss.
  recovery.OnPacketSent(Packet(0, 0));
  recovery.OnPacketSent(Packet(1, 3000000));
  recovery.OnPacketSent(Packet(2, 6000000));
  REQUIRE(recovery.OnAckReceived(Ack({{2, 2}}), 6100000, fate) == LossRecovery::AckResult::Ok);
  CHECK(fate.lost == std::vector<PacketNumber>{0, 1});
  CHECK(recovery.Statistics().persistentCongestion == 0);
  CHECK(recovery.Statistics().congestionWindow == 6000);
}

// --- The datagram size the connection sends (SetMaxDatagramSize) ---
// A connection's own maxDatagramSize may be far larger than the peer's; it then sends datagrams of
// the peer's size, and its windows and pacer must count those. Found by review: sized by the local
// 65507, the initial window was 131014 bytes (109 packets of 1200), the pacer's bucket 655 KB, and
// persistent congestion left 109 packets in flight instead of 2.

namespace {

constexpr std::size_t kLargeMds = 65507;  // the largest UDP payload: an endpoint's own maximum

LossRecoveryOptions LargeLocalOptions(bool modelBased) {
  LossRecoveryOptions options = Options();
  options.maxDatagramSize = kLargeMds;
  options.modelBased = modelBased;
  return options;
}

}  // namespace

TEST_CASE("LossRecovery told a smaller datagram size starts with the window and burst of that size",
          "[rudp][loss]") {
  const bool modelBased = GENERATE(false, true);
  CAPTURE(modelBased);
  LossRecovery recovery(LargeLocalOptions(modelBased));
  REQUIRE(recovery.Statistics().congestionWindow == NewReno::InitialWindow(kLargeMds));
  recovery.SetMaxDatagramSize(kMds);
  // RFC 9002 7.2 for 1200-byte datagrams, before the controller and in the one made after.
  CHECK(recovery.Statistics().congestionWindow == 12000);
  recovery.PrepareToSend(true);
  REQUIRE(recovery.HasController());
  CHECK(recovery.Statistics().congestionWindow == 12000);

  // At one instant, ten full packets go, no more: the window stops an eleventh, and so does the
  // pacer, whose bucket holds ten of them. (At time 0: the bucket earns from 0 at Bbr's rate.)
  const Microseconds now = 0;
  for (PacketNumber pn = 0; pn < 10; ++pn) {
    REQUIRE(recovery.CanSend(kMds));
    REQUIRE(recovery.NextSendTime(now) == now);
    recovery.OnPacketSent(Packet(pn, now));
  }
  CHECK_FALSE(recovery.CanSend(kMds));
  if (modelBased) {
    // Bbr paces at 2.77 x the initial window per ms: 33.24 bytes per us, 1200 bytes in 37 us.
    CHECK(recovery.NextSendTime(now) == now + 37);
  } else {
    // 1200 / (1.25 * 12000 / 333000): as for a connection whose own size is 1200.
    CHECK(recovery.NextSendTime(now) == now + 26640);
  }
}

TEST_CASE("LossRecovery persistent congestion collapses to the minimum window of the sent size",
          "[rudp][loss]") {
  const bool modelBased = GENERATE(false, true);
  CAPTURE(modelBased);
  LossRecovery recovery(LargeLocalOptions(modelBased));
  recovery.SetMaxDatagramSize(kMds);
  RecordingFate fate;
  // As in "persistent congestion collapses the window to the minimum": 1-5 lost over 900 ms,
  // more than 3 PTOs (750 ms) with nothing acknowledged between.
  Sample(recovery, fate, 0, 0, 100000);
  const Microseconds sent[] = {200000, 400000, 600000, 800000, 1100000};
  for (PacketNumber pn = 1; pn <= 5; ++pn) recovery.OnPacketSent(Packet(pn, sent[pn - 1]));
  recovery.OnPacketSent(Packet(6, 1150000));
  recovery.OnPacketSent(Packet(7, 1200000));
  REQUIRE(recovery.OnAckReceived(Ack({{6, 6}}), 1250000, fate) == LossRecovery::AckResult::Ok);
  REQUIRE(fate.lost == std::vector<PacketNumber>{1, 2, 3, 4, 5});
  REQUIRE(recovery.Statistics().persistentCongestion == 1);
  // NewReno's minimum is 2 datagrams (RFC 9002 7.2); Bbr's is 4 (its ProbeRTT floor), and it
  // grows at once by the packet this ACK acknowledged (NewReno grows nothing from an ACK whose
  // losses reduced the window).
  CHECK(recovery.Statistics().congestionWindow == (modelBased ? 4 * kMds + kMds : 2 * kMds));
}

TEST_CASE(
    "LossRecovery refuses a new datagram size with packets in flight or a controller, "
    "changing nothing",
    "[rudp][loss]") {
  LossRecovery recovery(LargeLocalOptions(false));
  RecordingFate fate;
  const std::uint64_t largeWindow = NewReno::InitialWindow(kLargeMds);
  CHECK_THROWS_AS(recovery.SetMaxDatagramSize(0), std::invalid_argument);
  CHECK(recovery.Statistics().congestionWindow == largeWindow);

  // A keepalive in flight (no controller yet): what is in flight was counted in the old size.
  SentPacket ping = Packet(0, 1000, true, static_cast<std::uint32_t>(kMinDataPacketSize));
  ping.pingOnly = true;
  recovery.OnPacketSent(ping);
  REQUIRE_FALSE(recovery.HasController());
  CHECK_THROWS_AS(recovery.SetMaxDatagramSize(kMds), std::logic_error);
  CHECK(recovery.Statistics().congestionWindow == largeWindow);
  // Acknowledged, nothing is in flight: the size may change.
  REQUIRE(recovery.OnAckReceived(Ack({{0, 0}}), 21000, fate) == LossRecovery::AckResult::Ok);
  recovery.SetMaxDatagramSize(kMds);
  CHECK(recovery.Statistics().congestionWindow == 12000);

  // A controller sized its window in the size it was made with.
  recovery.PrepareToSend(true);
  REQUIRE(recovery.HasController());
  CHECK_THROWS_AS(recovery.SetMaxDatagramSize(kLargeMds), std::logic_error);
  CHECK(recovery.Statistics().congestionWindow == 12000);
  CHECK(recovery.NextSendTime(21000) == 21000);
  for (PacketNumber pn = 1; pn <= 10; ++pn) recovery.OnPacketSent(Packet(pn, 21000));
  CHECK_FALSE(recovery.CanSend(kMds));
}

TEST_CASE("LossRecovery congestion avoidance adds one datagram per window acked", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 4; ++pn) recovery.OnPacketSent(Packet(pn, 0));
  REQUIRE(recovery.OnAckReceived(Ack({{3, 3}}), 100000, fate) == LossRecovery::AckResult::Ok);
  REQUIRE(recovery.Statistics().congestionWindow == 6000);  // ssthresh 6000: avoidance
  REQUIRE(recovery.OnAckReceived(Ack({{1, 3}}), 100000, fate) == LossRecovery::AckResult::Ok);
  REQUIRE(recovery.Statistics().bytesInFlight == 0);

  // A full window (5 packets) sent after the recovery started, all acked: + 1200 * 6000 / 6000.
  PacketNumber pn = 4;
  for (int i = 0; i < 5; ++i) recovery.OnPacketSent(Packet(pn++, 110000));
  REQUIRE(recovery.OnAckReceived(Ack({{4, 8}}), 200000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().congestionWindow == 7200);

  // The next window, 6 packets: + 1200 * 7200 / 7200.
  for (int i = 0; i < 6; ++i) recovery.OnPacketSent(Packet(pn++, 210000));
  REQUIRE(recovery.OnAckReceived(Ack({{4, 14}}), 300000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().congestionWindow == 8400);

  // 7 packets, 4 acked: + 1200 * 4800 / 8400 = 685, remainder 6000 carried. The sender refills
  // the window, then 3 more are acked: + (1200 * 3600 + 6000) / 9085 = 476.
  for (int i = 0; i < 7; ++i) recovery.OnPacketSent(Packet(pn++, 310000));
  REQUIRE(recovery.OnAckReceived(Ack({{4, 18}}), 400000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().congestionWindow == 8400 + 685);
  for (int i = 0; i < 4; ++i) recovery.OnPacketSent(Packet(pn++, 400000));
  REQUIRE_FALSE(recovery.CanSend(kMds));  // the window is in use
  REQUIRE(recovery.OnAckReceived(Ack({{4, 21}}), 400100, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().congestionWindow == 8400 + 685 + 476);
  CHECK(recovery.Statistics().congestionEvents == 1);
}

namespace {

// A bulk sender that keeps its window full over a path whose RTT the test picks per round. Every
// ACK acknowledges the oldest packets in flight, `rtt` after the newest of them was sent, and the
// sender refills the window at once, as ACK clocking does; so each ACK gives one RTT sample of
// exactly `rtt`, and a Round() (the packets in flight when it starts, sent in the previous one) is
// a HyStart++ round (RFC 9406 4.2).
class BulkSender {
 public:
  explicit BulkSender(bool congestionControl = true) : m_recovery(Options(congestionControl)) {
    Fill();
  }

  // Acknowledges what is in flight, `perAck` packets per ACK frame; returns the bytes acked.
  std::uint64_t Round(Microseconds rtt, std::size_t perAck = 1) {
    std::size_t left = m_inFlight.size();
    std::uint64_t acked = 0;
    while (left > 0) {
      const std::size_t count = std::min(perAck, left);
      acked += AckNext(rtt, count);
      left -= count;
    }
    return acked;
  }

  std::uint64_t AckNext(Microseconds rtt, std::size_t count = 1) {
    REQUIRE(m_inFlight.size() >= count);
    const PacketNumber smallest = m_inFlight.front().packetNumber;
    const SentPacket newest = m_inFlight[count - 1];
    m_inFlight.erase(m_inFlight.begin(), m_inFlight.begin() + static_cast<std::ptrdiff_t>(count));
    m_now = std::max(m_now, newest.timeSent + rtt);
    REQUIRE(m_recovery.OnAckReceived(Ack({{smallest, newest.packetNumber}}), m_now, m_fate) ==
            LossRecovery::AckResult::Ok);
    REQUIRE(Stats().latestRtt == rtt);
    Fill();
    return count * kMds;
  }

  // The oldest packet in flight never arrives.
  void DropNext() { m_inFlight.pop_front(); }

  std::uint64_t Window() const { return Stats().congestionWindow; }
  LossRecoveryStatistics Stats() const { return m_recovery.Statistics(); }
  const RecordingFate& Fate() const { return m_fate; }

 private:
  void Fill() {
    // Without congestion control CanSend() always agrees: the computed window still bounds us.
    while (m_recovery.CanSend(kMds) && Stats().bytesInFlight + kMds <= Window()) {
      m_inFlight.push_back(Packet(m_next++, m_now));
      m_recovery.OnPacketSent(m_inFlight.back());
    }
  }

  LossRecovery m_recovery;
  RecordingFate m_fate;
  std::deque<SentPacket> m_inFlight;
  PacketNumber m_next = 0;
  Microseconds m_now = 0;
};

// Three rounds at 20 ms (the first has no previous round to compare with), then one at 25 ms:
// 25 >= 20 + max(4 ms, 20 ms / 8) on its 8th sample.
void EnterConservativeSlowStart(BulkSender& sender) {
  for (int round = 0; round < 3; ++round) sender.Round(20000);
  REQUIRE(sender.Window() == 96000);  // 80 packets in flight
  sender.Round(25000);
  REQUIRE(sender.Stats().slowStartExitsOnDelay == 1);
  // 8 ACKs in slow start, then 72 in CSS at a quarter of 1200 each.
  REQUIRE(sender.Window() == 96000 + 8 * kMds + 72 * kMds / 4);
}

}  // namespace

TEST_CASE("LossRecovery HyStart++ keeps slow start while the RTT stays constant", "[rudp][loss]") {
  BulkSender sender;
  for (int round = 0; round < 8; ++round) {
    const std::uint64_t window = sender.Window();
    CHECK(sender.Round(20000) == window);  // the whole window was in use...
    CHECK(sender.Window() == 2 * window);  // ...and doubles
  }
  CHECK(sender.Window() == 12000u << 8);
  CHECK(sender.Stats().slowStartExitsOnDelay == 0);
  CHECK(sender.Stats().congestionEvents == 0);
}

TEST_CASE("LossRecovery HyStart++ delay threshold is an eighth of the RTT within 4 and 16 ms",
          "[rudp][loss]") {
  auto exitsAfter = [](Microseconds base, Microseconds risen) {
    BulkSender sender;
    for (int round = 0; round < 3; ++round) sender.Round(base);
    sender.Round(risen);
    return sender.Stats().slowStartExitsOnDelay;
  };
  // 20 ms / 8 = 2.5 ms, raised to 4 ms.
  CHECK(exitsAfter(20000, 23999) == 0);
  CHECK(exitsAfter(20000, 24000) == 1);
  // 80 ms / 8 = 10 ms.
  CHECK(exitsAfter(80000, 89999) == 0);
  CHECK(exitsAfter(80000, 90000) == 1);
  // 200 ms / 8 = 25 ms, lowered to 16 ms.
  CHECK(exitsAfter(200000, 215999) == 0);
  CHECK(exitsAfter(200000, 216000) == 1);
}

TEST_CASE("LossRecovery HyStart++ rising RTT enters CSS, which ends in congestion avoidance",
          "[rudp][loss]") {
  BulkSender sender;
  EnterConservativeSlowStart(sender);
  // CSS grows by a quarter of what is acked. The partial round CSS began in counts as its first,
  // so four full rounds follow.
  for (int round = 0; round < 4; ++round) {
    const std::uint64_t window = sender.Window();
    const std::uint64_t acked = sender.Round(25000);
    CHECK(acked > window - kMds);
    CHECK(sender.Window() == window + acked / 4);
  }
  // The first ACK of the next round ends the fifth: ssthresh = cwnd, so congestion avoidance adds
  // at most one datagram for the window acked.
  const std::uint64_t window = sender.Window();
  sender.Round(25000);
  CHECK(sender.Window() > window);
  CHECK(sender.Window() <= window + kMds);
  CHECK(sender.Stats().slowStartExitsOnDelay == 1);
  CHECK(sender.Stats().congestionEvents == 0);
}

TEST_CASE("LossRecovery HyStart++ returns to slow start when the RTT falls below the CSS baseline",
          "[rudp][loss]") {
  BulkSender sender;
  EnterConservativeSlowStart(sender);  // baseline 25 ms
  // 21 ms is below the baseline: 8 ACKs grow as CSS, then the rest as slow start.
  std::uint64_t window = sender.Window();
  std::uint64_t acked = sender.Round(21000);
  CHECK(sender.Window() == window + 8 * kMds / 4 + (acked - 8 * kMds));
  // Slow start again: doubling, no new exit at a steady 21 ms.
  window = sender.Window();
  acked = sender.Round(21000);
  CHECK(sender.Window() == window + acked);
  CHECK(sender.Stats().slowStartExitsOnDelay == 1);
}

TEST_CASE("LossRecovery HyStart++ decides nothing on fewer than 8 RTT samples in a round",
          "[rudp][loss]") {
  BulkSender sender;
  sender.Round(20000);
  sender.Round(20000);
  REQUIRE(sender.Window() == 48000);  // 40 packets in flight

  SECTION("7 samples") {
    // 40 ms, but acked 6 packets per ACK: 7 ACKs, 7 samples.
    sender.Round(40000, 6);
    CHECK(sender.Stats().slowStartExitsOnDelay == 0);
    CHECK(sender.Window() == 96000);
    // The rise is now the previous round's minimum: nothing to compare against any more.
    sender.Round(40000);
    CHECK(sender.Stats().slowStartExitsOnDelay == 0);
    CHECK(sender.Window() == 192000);
  }
  SECTION("8 samples") {
    sender.Round(40000, 5);
    CHECK(sender.Stats().slowStartExitsOnDelay == 1);
  }
}

TEST_CASE("LossRecovery HyStart++ loss in CSS halves the window as NewReno does", "[rudp][loss]") {
  BulkSender sender;
  EnterConservativeSlowStart(sender);
  const std::uint64_t window = sender.Window();
  sender.DropNext();
  sender.AckNext(25000);
  sender.AckNext(25000);
  REQUIRE(sender.Window() == window + 2 * kMds / 4);
  // The third packet acked after the gap declares it lost (RFC 9002 6.1.1).
  sender.AckNext(25000);
  CHECK(sender.Fate().lost.size() == 1);
  CHECK(sender.Stats().congestionEvents == 1);
  CHECK(sender.Window() == (window + 2 * kMds / 4) / 2);
  // What is in flight was sent before the recovery period or at its very start: no growth.
  const std::uint64_t halved = sender.Window();
  sender.Round(25000);
  CHECK(sender.Window() == halved);
  // Then congestion avoidance, not CSS or slow start again: at most a datagram per round.
  for (int round = 0; round < 2; ++round) {
    const std::uint64_t before = sender.Window();
    sender.Round(25000);
    CHECK(sender.Window() <= before + kMds);
  }
  CHECK(sender.Window() > halved);
  CHECK(sender.Stats().slowStartExitsOnDelay == 1);
}

TEST_CASE("LossRecovery HyStart++ leaves the window statistic alone without congestion control",
          "[rudp][loss]") {
  BulkSender sender(false);
  for (int round = 0; round < 3; ++round) sender.Round(20000);
  REQUIRE(sender.Window() == 96000);
  sender.Round(25000);
  sender.Round(25000);
  CHECK(sender.Window() == 384000);  // plain slow start
  CHECK(sender.Stats().slowStartExitsOnDelay == 0);
}

TEST_CASE("LossRecovery paces after the initial burst", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  Sample(recovery, fate, 0, 0, 100000);  // srtt 100 ms: rate 1.25 * 12000 / 100000 B/us
  Microseconds now = 100000;
  // The bucket holds max(10 * mds, rate * 4 ms) = 12000 bytes: ten packets go at once.
  PacketNumber pn = 1;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(recovery.NextSendTime(now) == now);
    recovery.OnPacketSent(Packet(pn++, now));
  }
  // Then one per 1200 / 0.15 = 8000 us.
  CHECK(recovery.NextSendTime(now) == now + 8000);
  CHECK(recovery.NextSendTime(now + 7999) == now + 8000);
  CHECK(recovery.NextSendTime(now + 8000) == now + 8000);
  now += 8000;
  recovery.OnPacketSent(Packet(pn++, now));
  CHECK(recovery.NextSendTime(now) == now + 8000);
  // Half way there: half the wait left.
  CHECK(recovery.NextSendTime(now + 4000) == now + 8000);
}

TEST_CASE("LossRecovery before a sample paces over the initial RTT", "[rudp][loss]") {
  LossRecovery recovery(Options());
  for (PacketNumber pn = 0; pn < 10; ++pn) {
    REQUIRE(recovery.NextSendTime(1000) == 1000);
    recovery.OnPacketSent(Packet(pn, 1000));
  }
  // 1200 / (1.25 * 12000 / 333000) = 26640 us.
  CHECK(recovery.NextSendTime(1000) == 1000 + 26640);
}

TEST_CASE("LossRecovery pacing burst covers 4 ms at high rates", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  Sample(recovery, fate, 0, 0, 1000);  // srtt 1 ms: rate 15 B/us, burst 60000 bytes
  const Microseconds now = 1000000;    // long idle: the bucket is full
  PacketNumber pn = 1;
  int burst = 0;
  while (recovery.NextSendTime(now) == now && burst < 100) {
    recovery.OnPacketSent(Packet(pn++, now));
    ++burst;
  }
  CHECK(burst == 50);
  CHECK(recovery.NextSendTime(now) == now + 80);
}

TEST_CASE("LossRecovery without congestion control neither limits nor paces", "[rudp][loss]") {
  SECTION("congestion control off") {
    LossRecovery recovery(Options(false));
    RecordingFate fate;
    for (PacketNumber pn = 0; pn < 100; ++pn) {
      CHECK(recovery.CanSend(kMds));
      CHECK(recovery.NextSendTime(1000) == 1000);
      recovery.OnPacketSent(Packet(pn, 1000));
    }
    CHECK(recovery.Statistics().bytesInFlight == 100 * kMds);
    // Statistics still count RTT and losses.
    REQUIRE(recovery.OnAckReceived(Ack({{50, 99}}), 21000, fate) == LossRecovery::AckResult::Ok);
    CHECK(recovery.Statistics().smoothedRtt == 20000);
    CHECK(recovery.Statistics().packetsLost == 50);
    CHECK(recovery.CanSend(1000000));
  }
  SECTION("pacing off") {
    LossRecovery recovery(Options(true, false));
    for (PacketNumber pn = 0; pn < 10; ++pn) recovery.OnPacketSent(Packet(pn, 1000));
    CHECK(recovery.NextSendTime(1000) == 1000);
    CHECK_FALSE(recovery.CanSend(kMds));
  }
}

TEST_CASE("LossRecovery keeps a bounded record over 100000 packets", "[rudp][loss]") {
  LossRecovery recovery(Options(false));
  RecordingFate fate;
  std::size_t maxRecords = 0;
  constexpr PacketNumber kPackets = 100000;
  for (PacketNumber pn = 0; pn < kPackets; ++pn) {
    const Microseconds now = pn * 100;
    recovery.OnPacketSent(Packet(pn, now));
    if (pn % 2 == 1) {
      // Every thousandth packet (x500) is never acknowledged.
      const PacketNumber previous = pn - 1;
      const AckFrame ack = previous % 1000 == 500 ? Ack({{pn, pn}}) : Ack({{previous, pn}});
      REQUIRE(recovery.OnAckReceived(ack, now + 50, fate) == LossRecovery::AckResult::Ok);
    }
    if (recovery.RecordCount() > maxRecords) maxRecords = recovery.RecordCount();
  }
  CHECK(recovery.Statistics().packetsLost == kPackets / 1000);
  CHECK(recovery.Statistics().packetsAcked == kPackets - kPackets / 1000);
  CHECK(recovery.Statistics().spuriousLosses == 0);
  // A lost record is kept 3 PTOs (3 * ~1.1 ms) while packets go every 100 us.
  CHECK(maxRecords < 64);
  CHECK(fate.lost.size() == kPackets / 1000);
}

TEST_CASE("LossRecovery forgets the oldest lost records beyond 65536", "[rudp][loss]") {
  LossRecovery recovery(Options(false));
  RecordingFate fate;
  recovery.SetPeerMaxAckDelay(10000000);  // PTO > 10 s: lost records would be kept 30 s
  Sample(recovery, fate, 0, 0, 1000000);
  constexpr PacketNumber kPackets = 100000;
  for (PacketNumber pn = 1; pn <= kPackets; ++pn) {
    const Microseconds now = 1000000 + pn;
    recovery.OnPacketSent(Packet(pn, now));
    // Only every fourth packet is acknowledged: the other three are lost by count.
    if (pn % 4 == 0) {
      REQUIRE(recovery.OnAckReceived(Ack({{pn, pn}}), now, fate) == LossRecovery::AckResult::Ok);
    }
    REQUIRE(recovery.RecordCount() <= (std::size_t{1} << 16));
  }
  CHECK(recovery.Statistics().packetsLost == kPackets / 4 * 3 - 2);  // the last 2 are recent
  // A late ACK for a forgotten lost packet is ignored; a remembered one is a spurious loss.
  REQUIRE(recovery.OnAckReceived(Ack({{1, 1}}), 1200000, fate) == LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().spuriousLosses == 0);
  REQUIRE(recovery.OnAckReceived(Ack({{kPackets - 3, kPackets - 3}}), 1200000, fate) ==
          LossRecovery::AckResult::Ok);
  CHECK(recovery.Statistics().spuriousLosses == 1);
}

TEST_CASE("LossRecovery DiscardAll forgets what is in flight", "[rudp][loss]") {
  LossRecovery recovery(Options());
  RecordingFate fate;
  for (PacketNumber pn = 0; pn < 5; ++pn) recovery.OnPacketSent(Packet(pn, pn));
  recovery.DiscardAll();
  CHECK(recovery.Statistics().bytesInFlight == 0);
  CHECK_FALSE(recovery.HasAckElicitingInFlight());
  CHECK_FALSE(recovery.LossDetectionDeadline().has_value());
  CHECK(recovery.RecordCount() == 0);
  CHECK(recovery.OnAckReceived(Ack({{0, 4}}), 1000, fate) == LossRecovery::AckResult::Ok);
  CHECK(fate.acked.empty());
  CHECK(recovery.OnAckReceived(Ack({{5, 5}}), 1000, fate) ==
        LossRecovery::AckResult::AckedUnsentPacket);
}
