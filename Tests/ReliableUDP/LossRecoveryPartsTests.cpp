// The parts of loss recovery on their own: the sent-packet log, the RTT estimator (RFC 9002 5),
// the congestion controllers (NewReno, the known-path profile; RFC 9002 7) and the pacer (7.7).
// LossRecoveryTests.cpp checks them working together.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>

#include "ReliableUDP/Detail/KnownPathController.h"
#include "ReliableUDP/Detail/NewReno.h"
#include "ReliableUDP/Detail/Pacer.h"
#include "ReliableUDP/Detail/RttEstimator.h"
#include "ReliableUDP/Detail/SentPacketLog.h"

using namespace timerwheel::rudp::detail;

namespace {

constexpr std::uint32_t kMds = 1200;

SentPacket Sent(PacketNumber pn, Microseconds timeSent, std::uint32_t size = kMds) {
  SentPacket packet;
  packet.packetNumber = pn;
  packet.timeSent = timeSent;
  packet.size = size;
  packet.ackEliciting = true;
  return packet;
}

// A controller's OnPacketSent with `bytesInFlight` in flight after it (the packet is not looked
// at).
void SendInFlight(ICongestionController& controller, std::uint64_t bytesInFlight) {
  SentPacket packet;
  controller.OnPacketSent(packet, bytesInFlight);
}

AckEvent AckedAll(Microseconds now, std::uint64_t bytesInFlight = 0) {
  AckEvent event;
  event.now = now;
  event.bytesInFlight = bytesInFlight;
  return event;
}

}  // namespace

// --- SentPacketLog ------------------------------------------------------------------------------

TEST_CASE("SentPacketLog keeps records in packet-number order and finds them by number",
          "[rudp][loss][sentpacketlog]") {
  SentPacketLog log;
  for (const PacketNumber pn : {0u, 2u, 5u}) log.Push(Sent(pn, 100 * pn));
  REQUIRE(log.Count() == 3);
  CHECK(log.LowerBound(0) == 0);
  CHECK(log.LowerBound(1) == 1);
  CHECK(log.LowerBound(2) == 1);
  CHECK(log.LowerBound(3) == 2);
  CHECK(log.LowerBound(6) == 3);
  for (std::size_t i = 0; i < log.Count(); ++i) {
    CHECK(log.At(i).state == SentPacketLog::State::Outstanding);
  }
  CHECK(log.At(2).packet.timeSent == 500);
}

TEST_CASE("SentPacketLog hints skip settled records and trimming forgets acked and old lost ones",
          "[rudp][loss][sentpacketlog]") {
  SentPacketLog log;
  for (PacketNumber pn = 0; pn < 5; ++pn) log.Push(Sent(pn, pn));
  log.At(0).state = SentPacketLog::State::Acked;
  log.At(1).state = SentPacketLog::State::Acked;
  log.At(2).state = SentPacketLog::State::Lost;
  log.At(2).lostTime = 100;
  log.AdvanceHints(5);
  CHECK(log.FirstOutstanding() == 3);
  CHECK(log.FirstUnacked() == 2);  // a lost packet may still be acknowledged

  log.TrimFront(/*now*/ 150, /*keepLost*/ 100);  // the lost one is still young
  REQUIRE(log.Count() == 3);
  CHECK(log.At(0).packet.packetNumber == 2);
  log.TrimFront(200, 100);
  REQUIRE(log.Count() == 2);
  CHECK(log.At(0).packet.packetNumber == 3);

  log.At(0).state = SentPacketLog::State::Acked;
  log.At(1).state = SentPacketLog::State::Acked;
  log.AdvanceHints(5);
  CHECK(log.FirstOutstanding() == 5);  // nothing left: one past the largest sent
  CHECK(log.FirstUnacked() == 5);
}

TEST_CASE("SentPacketLog keeps its order as the ring wraps and grows",
          "[rudp][loss][sentpacketlog]") {
  SentPacketLog log;
  PacketNumber next = 0;
  for (int round = 0; round < 40; ++round) {
    // Push three, settle and forget the oldest two: the head walks around the ring.
    for (int i = 0; i < 3; ++i) log.Push(Sent(next++, 0));
    log.At(0).state = SentPacketLog::State::Acked;
    log.At(1).state = SentPacketLog::State::Acked;
    log.TrimFront(0, 0);
  }
  REQUIRE(log.Count() == 40);
  for (std::size_t i = 1; i < log.Count(); ++i) {
    CHECK(log.At(i).packet.packetNumber == log.At(i - 1).packet.packetNumber + 1);
  }
  log.Clear(next);
  CHECK(log.Count() == 0);
  CHECK(log.FirstOutstanding() == next);
  CHECK(log.FirstUnacked() == next);
}

TEST_CASE("SentPacketLog gives back its room at a quiet moment, keeping its records and links",
          "[rudp][loss][sentpacketlog]") {
  SentPacketLog log;
  PacketNumber next = 0;
  for (int i = 0; i < 100; ++i) log.Push(Sent(next++, 0));
  REQUIRE(log.Capacity() == 128);
  log.ReleaseIdleMemory();  // 100 records held: the ring is already the smallest that holds them
  CHECK(log.Capacity() == 128);
  // Settle all but the newest five, the head well into the ring; the middle two of those five are
  // Acked (linked past themselves), the rest Outstanding.
  for (std::size_t i = 0; i < 95; ++i) log.At(i).state = SentPacketLog::State::Acked;
  log.TrimFront(0, 0);
  REQUIRE(log.Count() == 5);
  log.MarkAcked(1);
  log.MarkAcked(2);
  log.ReleaseIdleMemory();
  CHECK(log.Capacity() == 8);
  REQUIRE(log.Count() == 5);
  for (std::size_t i = 0; i < log.Count(); ++i) CHECK(log.At(i).packet.packetNumber == 95 + i);
  CHECK(log.NextNotAcked(1) == 3);  // the links, by sequence number, survive the move
  CHECK(log.LowerBound(98) == 3);
  for (std::size_t i = 0; i < log.Count(); ++i) log.At(i).state = SentPacketLog::State::Acked;
  log.TrimFront(0, 0);
  log.ReleaseIdleMemory();
  CHECK(log.Capacity() == 1);  // an idle connection's: one keepalive in flight
  log.Push(Sent(next++, 0));   // and it still works
  log.Push(Sent(next++, 0));
  CHECK(log.Count() == 2);
  CHECK(log.At(1).packet.packetNumber == next - 1);
}

// --- RttEstimator -------------------------------------------------------------------------------

TEST_CASE("RttEstimator before a sample uses the initial RTT and PTO", "[rudp][loss][rtt]") {
  const RttEstimator rtt;
  CHECK_FALSE(rtt.HasSample());
  CHECK(rtt.Smoothed() == 0);
  CHECK(rtt.LossDelay() == kInitialRtt * 9 / 8);
  CHECK(rtt.ProbeTimeout() == kInitialPto);
  CHECK(rtt.PacingRtt() == kInitialRtt);
}

TEST_CASE("RttEstimator follows RFC 9002 5.3 with the peer's ack delay capped and bounded",
          "[rudp][loss][rtt]") {
  RttEstimator rtt;
  rtt.SetPeerMaxAckDelay(10'000);
  rtt.OnSample(100'000, /*ackDelay*/ 0, /*now*/ 7);
  CHECK(rtt.HasSample());
  CHECK(rtt.FirstSampleTime() == 7);
  CHECK(rtt.Smoothed() == 100'000);
  CHECK(rtt.Variation() == 50'000);
  CHECK(rtt.Min() == 100'000);
  CHECK(rtt.ProbeTimeout() == 100'000 + 4 * 50'000 + 10'000);

  // A delay of 50 ms is trusted only up to the 10 ms promised: adjusted 120 ms.
  rtt.OnSample(130'000, 50'000, 8);
  CHECK(rtt.Latest() == 130'000);
  CHECK(rtt.Variation() == (3 * 50'000 + 20'000) / 4);
  CHECK(rtt.Smoothed() == (7 * 100'000 + 120'000) / 8);
  CHECK(rtt.FirstSampleTime() == 7);

  // Subtracting the delay would take the sample below the minimum: it is used as it is.
  const Microseconds smoothed = rtt.Smoothed();
  rtt.OnSample(105'000, 10'000, 9);
  CHECK(rtt.Smoothed() == (7 * smoothed + 105'000) / 8);
  CHECK(rtt.Min() == 100'000);
  CHECK(rtt.LossDelay() == std::max(rtt.Smoothed(), rtt.Latest()) * 9 / 8);
}

TEST_CASE("RttEstimator floors the loss delay at the timer granularity and the pacing RTT at 1",
          "[rudp][loss][rtt]") {
  RttEstimator rtt;
  rtt.OnSample(0, 0, 1);  // loopback can measure 0
  CHECK(rtt.LossDelay() == kTimerGranularity);
  CHECK(rtt.ProbeTimeout() == kTimerGranularity);
  CHECK(rtt.PacingRtt() == 1);
}

// --- Congestion controllers ---------------------------------------------------------------------

TEST_CASE("NewReno starts at the RFC 9002 initial window and grows in slow start when used",
          "[rudp][loss][newreno]") {
  NewReno reno(NewRenoOptions{kMds, /*hyStart*/ false, /*paced*/ true});
  REQUIRE(reno.Window() == 10 * kMds);
  CHECK(NewReno::InitialWindow(1200) == 12'000);
  CHECK(NewReno::InitialWindow(9000) == 18'000);  // 2 * mds when that is more than 14720
  CHECK(reno.LimitsSending());

  SECTION("a fully used window doubles in a round trip") {
    SendInFlight(reno, 10 * kMds);
    for (PacketNumber pn = 0; pn < 10; ++pn) reno.OnPacketAcked(Sent(pn, 0), 0);
    reno.OnAckProcessed(AckedAll(1000));
    CHECK(reno.Window() == 20 * kMds);
  }
  SECTION("a window the sender leaves unused does not grow") {
    SendInFlight(reno, kMds);
    reno.OnPacketAcked(Sent(0, 0), 0);
    reno.OnAckProcessed(AckedAll(1000));
    CHECK(reno.Window() == 10 * kMds);
  }
}

TEST_CASE("NewReno halves once per recovery period and does not grow from packets sent before it",
          "[rudp][loss][newreno]") {
  NewReno reno(NewRenoOptions{kMds, false, true});
  CHECK(reno.OnPacketsLost(/*largestLostSentTime*/ 100, kMds, /*now*/ 200));
  CHECK(reno.Window() == 5 * kMds);
  CHECK_FALSE(reno.OnPacketsLost(150, kMds, 250));  // sent before the recovery period began
  CHECK(reno.Window() == 5 * kMds);
  CHECK(reno.Statistics().congestionEvents == 1);

  // Congestion avoidance now (window == ssthresh); an ACK of a packet sent before the recovery
  // period adds nothing, one of a packet sent after it adds mds per window acknowledged.
  SendInFlight(reno, 5 * kMds);
  reno.OnPacketAcked(Sent(0, 150, 5 * kMds), 0);
  reno.OnAckProcessed(AckedAll(300));
  CHECK(reno.Window() == 5 * kMds);
  SendInFlight(reno, 5 * kMds);
  reno.OnPacketAcked(Sent(1, 250, 5 * kMds), 0);
  reno.OnAckProcessed(AckedAll(400));
  CHECK(reno.Window() == 6 * kMds);

  CHECK(reno.OnPacketsLost(300, kMds, 500));  // sent after the first period began: a new one
  CHECK(reno.Window() == 3 * kMds);
  reno.OnPersistentCongestion();
  CHECK(reno.Window() == 2 * kMds);  // the minimum window
  CHECK(reno.Statistics().persistentCongestion == 1);
  CHECK(reno.Statistics().congestionEvents == 2);
}

TEST_CASE("NewReno grows nothing from an ACK whose losses reduced the window",
          "[rudp][loss][newreno]") {
  NewReno reno(NewRenoOptions{kMds, false, true});
  SendInFlight(reno, 10 * kMds);
  reno.OnPacketAcked(Sent(0, 1000), 0);
  REQUIRE(reno.OnPacketsLost(1000, kMds, 2000));
  AckEvent ack = AckedAll(2000);
  ack.windowReduced = true;
  reno.OnAckProcessed(ack);
  CHECK(reno.Window() == 5 * kMds);
}

TEST_CASE("The known-path controller never limits sending but keeps NewReno's window as a figure",
          "[rudp][loss][knownpath]") {
  KnownPathController known(kMds);
  CHECK_FALSE(known.LimitsSending());
  CHECK(known.Window() == 10 * kMds);
  CHECK(known.OnPacketsLost(100, kMds, 200));
  CHECK(known.Window() == 5 * kMds);
  CHECK(known.Statistics().congestionEvents == 1);
}

// --- Pacer --------------------------------------------------------------------------------------

TEST_CASE("Pacer lets the initial burst go, then spaces packets at 1.25 windows per RTT",
          "[rudp][loss][pacer]") {
  constexpr std::uint64_t kWindow = 10 * kMds;
  constexpr Microseconds kRtt = 100'000;
  Pacer pacer(kMds, kWindow, kRtt);  // capacity max(10 mds, rate * 4 ms) = 10 mds here
  const Microseconds start = 1'000'000;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(pacer.NextSendTime(start, kWindow, kRtt) == start);
    pacer.Refill(start, kWindow, kRtt);
    pacer.OnPacketSent(kMds);
  }
  // Empty: one mds takes mds * RTT / (1.25 * window) = 8 ms to earn.
  const Microseconds next = pacer.NextSendTime(start, kWindow, kRtt);
  CHECK(next == start + 8'000);
  CHECK(pacer.NextSendTime(next, kWindow, kRtt) == next);
  CHECK(pacer.NextSendTime(next - 1, kWindow, kRtt) > next - 1);
}

TEST_CASE("Pacer bucket never holds more than its capacity, which covers 4 ms at high rates",
          "[rudp][loss][pacer]") {
  constexpr std::uint64_t kWindow = 1000 * kMds;
  constexpr Microseconds kRtt = 10'000;
  // Rate 1.25 * 1.2 MB per 10 ms: 4 ms of it is 600 KB, 500 full-size packets.
  Pacer pacer(kMds, kWindow, kRtt);
  const Microseconds start = 5'000'000;
  pacer.Refill(start + 60'000'000, kWindow, kRtt);  // a long idle spell earns no more
  int sent = 0;
  while (pacer.NextSendTime(start + 60'000'000, kWindow, kRtt) == start + 60'000'000) {
    pacer.OnPacketSent(kMds);
    ++sent;
    REQUIRE(sent <= 1000);
  }
  CHECK(sent == 500);
}
