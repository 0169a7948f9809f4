// NewReno congestion control with HyStart++ (RFC 9002 7 and B, RFC 9406).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/CongestionController.h"

namespace timerwheel::rudp::detail {

struct NewRenoOptions {
  std::size_t maxDatagramSize = 1200;
  bool hyStart = true;  // HyStart++ in the initial slow start
  bool paced = true;    // the sender paces: no per-ACK growth cap in HyStart++ (L = infinity)
};

// In bytes: initial window min(10 * mds, max(14720, 2 * mds)), minimum 2 * mds; slow start,
// congestion avoidance (mds * acked / cwnd per ACK, remainders carried); halving at most once per
// round trip (7.3.2: a recovery period starts when a loss is detected; losses of packets sent
// before it do not reduce again, and their ACKs do not grow the window); persistent congestion
// collapses to the minimum window; a window that was not used (in flight stayed under half of
// it since the previous ACK) does not grow (7.8).
//
// HyStart++ (RFC 9406), in the initial slow start only (ssthresh still unset), so that slow start
// ends on rising delay before a bottleneck queue overflows: a round ends when a packet sent after
// it began is acked; once a round has 8 RTT samples (the latest RTT of each ACK that gives one),
// a minimum at least clamp(last round's minimum / 8, 4 ms, 16 ms) above the last round's enters
// Conservative Slow Start (growth acked / 4); a round minimum below the one that triggered CSS
// resumes slow start; after 5 CSS rounds (the first one partial) ssthresh = cwnd. Losses reduce
// the window as in NewReno, which ends HyStart++. Without pacing, growth per ACK is capped at
// 8 * mds (L = 8).
class NewReno final : public ICongestionController {
 public:
  explicit NewReno(const NewRenoOptions& options);

  void OnPacketSent(SentPacket& packet, std::uint64_t bytesInFlight) noexcept override;
  void OnPacketAcked(const SentPacket& packet, Microseconds now) noexcept override;
  bool OnPacketsLost(Microseconds largestLostSentTime, std::uint64_t lostBytes,
                     Microseconds now) noexcept override;
  void OnPersistentCongestion() noexcept override;
  void OnAckProcessed(const AckEvent& ack) noexcept override;
  void OnInFlightDiscarded() noexcept override;

  std::uint64_t Window() const noexcept override { return m_window; }
  bool LimitsSending() const noexcept override { return true; }
  const CongestionStatistics& Statistics() const noexcept override { return m_stats; }

  static std::uint64_t InitialWindow(std::size_t maxDatagramSize) noexcept;

 private:
  std::uint64_t MinimumWindow() const noexcept;
  void Grow(std::uint64_t ackedBytes) noexcept;
  bool HyStartActive() const noexcept;
  void HyStartNextRoundIfDue(PacketNumber largestAcked, PacketNumber nextPacketNumber) noexcept;
  void HyStartOnRttSample(Microseconds rtt) noexcept;

  NewRenoOptions m_options;
  std::uint64_t m_window;
  std::uint64_t m_ssthresh = UINT64_MAX;
  std::uint64_t m_avoidanceRemainder = 0;  // congestion avoidance growth below one byte, scaled
  std::uint64_t m_inFlightHigh = 0;        // most bytes in flight since the previous ACK
  std::uint64_t m_growthBytes = 0;         // acked in the ACK being processed, may grow the window
  bool m_inRecovery = false;
  Microseconds m_recoveryStart = 0;
  // HyStart++ (RFC 9406 4.2); UINT64_MAX stands for the RFC's "infinity" (no sample yet).
  PacketNumber m_roundEnd = 0;  // windowEnd: acking this packet (or a later one) ends the round
  Microseconds m_roundMinRtt = UINT64_MAX;
  Microseconds m_lastRoundMinRtt = UINT64_MAX;
  unsigned m_roundRttSamples = 0;
  bool m_conservative = false;  // in Conservative Slow Start
  Microseconds m_cssBaselineMinRtt = UINT64_MAX;
  unsigned m_cssRounds = 0;                // rounds ended since CSS began
  std::uint64_t m_cssGrowthRemainder = 0;  // acked bytes not yet turned into CSS growth
  CongestionStatistics m_stats;
};

}  // namespace timerwheel::rudp::detail
