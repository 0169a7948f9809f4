// Loss detection, RTT estimation, congestion control and pacing for one connection (RFC 9002).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/WireFormat.h"

namespace timerwheel::rudp::detail {

// One sent packet, and what it carried that must arrive reliably.
struct SentPacket {
  PacketNumber packetNumber = 0;
  Microseconds timeSent = 0;
  std::uint32_t size = 0;     // bytes on the wire
  bool ackEliciting = false;  // carried anything but ACK/padding; only these are in flight
  std::uint64_t streamOffset = 0;
  std::uint32_t streamSize = 0;  // 0: no STREAM frame
  bool hasMaxData = false;
  bool hasClose = false;
};

// How the connection learns the fate of what its packets carried.
class IPacketFate {
 public:
  virtual void OnPacketAcked(const SentPacket& packet) = 0;
  virtual void OnPacketLost(const SentPacket& packet) = 0;

 protected:
  ~IPacketFate() = default;
};

struct LossRecoveryOptions {
  std::size_t maxDatagramSize = 1200;
  bool congestionControl = true;  // false: the "known path" profile, no congestion window
  bool pacing = true;
};

struct LossRecoveryStatistics {
  Microseconds smoothedRtt = 0;  // 0 until the first sample
  Microseconds rttVariation = 0;
  Microseconds minRtt = 0;
  Microseconds latestRtt = 0;
  std::uint64_t congestionWindow = 0;
  std::uint64_t bytesInFlight = 0;
  std::uint64_t packetsAcked = 0;
  std::uint64_t packetsLost = 0;
  std::uint64_t spuriousLosses = 0;         // declared lost, acknowledged later
  std::uint64_t probeTimeouts = 0;          // PTO expirations
  std::uint64_t congestionEvents = 0;       // window reductions
  std::uint64_t persistentCongestion = 0;   // collapses to the minimum window
  std::uint64_t slowStartExitsOnDelay = 0;  // HyStart++ exits from slow start to CSS (RFC 9406)
};

// RFC 9002, sections 5-7 and appendices A/B:
//  - RTT: first sample sets smoothed = sample, variation = sample/2; then gains 1/8 and 1/4
//    (RFC 6298); ack delay subtracted (capped at the peer's max ACK delay) when it does not take
//    the sample below min RTT.
//  - Loss: a packet is lost when a later one is acked and it is kPacketThreshold (3) older, or
//    it was sent more than max(9/8 * max(smoothed, latest), kTimerGranularity) before now.
//  - PTO = smoothed + max(4 * variation, kTimerGranularity) + peer max ACK delay, times
//    2^consecutive PTOs (at most kMaxPtoBackoff); kInitialPto before the first sample.
//  - NewReno in bytes: initial window min(10 * mds, max(14720, 2 * mds)), minimum 2 * mds, slow
//    start, congestion avoidance, halving at most once per round trip (7.3.2: a recovery period
//    starts when a loss is detected; losses of packets sent before it do not reduce again),
//    persistent congestion (3 * PTO without backoff spanned by lost ack-eliciting packets, after an
//    RTT sample) collapses to the minimum window.
//  - HyStart++ (RFC 9406) in the initial slow start (ssthresh still unset), so that it ends on
//    rising delay before a bottleneck queue overflows: a round ends when a packet sent after it
//    began is acked; once a round has 8 RTT samples (latest RTT of each ACK that gives one), a
//    minimum at least clamp(last round's minimum / 8, 4 ms, 16 ms) above the last round's enters
//    Conservative Slow Start (growth acked / 4); a round minimum below the one that triggered CSS
//    resumes slow start; after 5 CSS rounds (the first one partial) ssthresh = cwnd. Losses reduce
//    the window as in NewReno, which ends HyStart++. Without pacing, growth per ACK is capped at
//    8 * mds (L = 8).
//  - Pacing: rate = 1.25 * cwnd / smoothed RTT (kInitialRtt before a sample); a token bucket whose
//    burst allows max(10 * mds, rate * 4 ms), so a 1 ms-granularity timer sustains the rate.
//    With congestionControl off, neither the window nor pacing limit sending (the window is
//    still computed, for the statistics).
// Not thread-safe (the endpoint's lock guards it); IPacketFate callbacks must not call back into
// this object. Steady state allocates nothing: the record of sent packets is a ring that keeps
// its capacity.
class LossRecovery {
 public:
  explicit LossRecovery(const LossRecoveryOptions& options);

  // Once the handshake has told us the peer's max ACK delay (before: 0).
  void SetPeerMaxAckDelay(Microseconds maxAckDelay) noexcept;

  // Packet numbers passed here strictly increase. Consumes pacing tokens for in-flight packets.
  // Packets that are not ack-eliciting only advance the packet number: they are not tracked.
  void OnPacketSent(const SentPacket& packet);

  enum class AckResult {
    Ok,
    AckedUnsentPacket,  // acknowledges a number never sent (optimistic ACK): protocol error, no
                        // state changed
  };
  // Processes an ACK frame: newly acked packets (fate.OnPacketAcked), RTT sample (if the largest
  // is newly acked and ack-eliciting), loss detection (fate.OnPacketLost, window reduction), then
  // window growth (none from an ACK that reduced the window, as in RFC 9002 A.7). A packet already
  // declared lost that is now acked counts as a spurious loss and is passed to OnPacketAcked as
  // well (its data is acked). Resets the PTO backoff.
  AckResult OnAckReceived(const AckFrame& ack, Microseconds now, IPacketFate& fate);

  // When the loss-detection timer must fire (absolute), or nullopt when it should be off:
  // the earliest time-threshold loss time if any, else the PTO deadline if anything
  // ack-eliciting is in flight.
  std::optional<Microseconds> LossDetectionDeadline() const noexcept;

  // The timer fired. Declares time-threshold losses (returns 0), or it was a PTO: backs off and
  // returns how many probe packets to send now (1, or 2 after the first PTO). Probes bypass the
  // congestion window and pacing.
  unsigned OnLossDetectionTimeout(Microseconds now, IPacketFate& fate);

  // Congestion window permits another in-flight packet of `bytes`.
  bool CanSend(std::size_t bytes) const noexcept;
  // The earliest time the pacer lets the next full-size packet go (<= now: send now).
  Microseconds NextSendTime(Microseconds now) const noexcept;

  bool HasAckElicitingInFlight() const noexcept;
  // PTO without backoff (used for idle-timeout floors and closing periods).
  Microseconds ProbeTimeout() const noexcept;
  const LossRecoveryStatistics& Statistics() const noexcept;
  // Sent packets still remembered (outstanding, or acked/lost but not yet forgotten): diagnostics.
  std::size_t RecordCount() const noexcept { return m_count; }

  // Forget everything in flight (connection closed).
  void DiscardAll() noexcept;

 private:
  struct Record {
    SentPacket packet;
    Microseconds lostTime = 0;  // when it was declared lost (state Lost)
    enum class State : std::uint8_t { Outstanding, Acked, Lost } state = State::Outstanding;
  };

  // The ring: index 0 is the oldest record kept; packet numbers ascend with the index.
  Record& At(std::size_t index) noexcept;
  const Record& At(std::size_t index) const noexcept;
  std::size_t LowerBound(PacketNumber pn) const noexcept;  // first index whose pn >= pn
  void Push(const SentPacket& packet);
  void PopFront() noexcept;
  void TrimFront(Microseconds now) noexcept;
  void AdvanceHints() noexcept;

  void UpdateRtt(Microseconds latest, Microseconds ackDelay, Microseconds now) noexcept;
  Microseconds LossDelay() const noexcept;
  Microseconds PtoDeadline() const noexcept;
  // Declares losses, responds to congestion; true if the window was reduced or collapsed.
  bool DetectLosses(Microseconds now, IPacketFate& fate);
  bool OnCongestionEvent(Microseconds sentTime, Microseconds now) noexcept;
  bool InPersistentCongestion(std::size_t firstIndex, std::size_t lastIndex) const noexcept;
  void GrowWindow(std::uint64_t ackedBytes) noexcept;
  std::uint64_t MinimumWindow() const noexcept;
  bool HyStartActive() const noexcept;
  void HyStartNextRoundIfDue() noexcept;
  void HyStartOnRttSample(Microseconds rtt) noexcept;

  bool Paced() const noexcept;
  double PacingTokensAt(Microseconds now) const noexcept;
  double PacingCapacity() const noexcept;
  void RefillPacer(Microseconds now) noexcept;

  LossRecoveryOptions m_options;
  std::vector<Record> m_ring;  // capacity a power of two (or 0), indexed modulo its size
  std::size_t m_head = 0;
  std::size_t m_count = 0;
  // Lower bounds on the oldest Outstanding record and the oldest record not yet Acked; states
  // only move away from Outstanding, so scans start here instead of at the front of the ring.
  PacketNumber m_firstOutstanding = 0;
  PacketNumber m_firstUnacked = 0;
  LossRecoveryStatistics m_stats;  // congestionWindow and bytesInFlight are the live values
  bool m_hasRttSample = false;
  Microseconds m_firstRttSampleTime = 0;
  Microseconds m_peerMaxAckDelay = 0;
  PacketNumber m_largestAcked = 0;
  bool m_anyAcked = false;
  PacketNumber m_nextPacketNumber = 0;  // one past the largest sent
  unsigned m_ptoCount = 0;
  std::uint64_t m_ackElicitingInFlight = 0;
  Microseconds m_lastAckElicitingSent = 0;
  Microseconds m_lossTime = 0;  // 0: none
  Microseconds m_recoveryStart = 0;
  bool m_inRecovery = false;
  std::uint64_t m_ssthresh = UINT64_MAX;
  std::uint64_t m_avoidanceRemainder = 0;  // congestion avoidance growth below one byte, scaled
  std::uint64_t m_inFlightHigh = 0;        // most bytes in flight since the previous ACK
  // HyStart++ (RFC 9406 4.2); UINT64_MAX stands for the RFC's "infinity" (no sample yet).
  PacketNumber m_roundEnd = 0;  // windowEnd: acking this packet (or a later one) ends the round
  Microseconds m_roundMinRtt = UINT64_MAX;
  Microseconds m_lastRoundMinRtt = UINT64_MAX;
  unsigned m_roundRttSamples = 0;
  bool m_conservative = false;  // in Conservative Slow Start
  Microseconds m_cssBaselineMinRtt = UINT64_MAX;
  unsigned m_cssRounds = 0;                // rounds ended since CSS began
  std::uint64_t m_cssGrowthRemainder = 0;  // acked bytes not yet turned into CSS growth
  double m_pacingTokens = 0;               // bytes
  Microseconds m_pacingUpdated = 0;
};

}  // namespace timerwheel::rudp::detail
