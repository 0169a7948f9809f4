// A model-based congestion controller in the manner of BBRv3 (draft-ietf-ccwg-bbr).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/CongestionController.h"
#include "ReliableUDP/Detail/DeliveryRateSampler.h"

namespace timerwheel::rudp::detail {

// Keeps a model of the path, the bottleneck bandwidth (the largest delivery rate sampled over the
// last two probing cycles) and the minimum RTT (over 10 s), paces at a gain times the bandwidth
// and caps what is in flight at a gain times their product (the BDP). Phases (CongestionPhase):
// Startup (pacing gain 2.77, until the bandwidth grows less than 25 % in 3 round trips, or 8 RTT
// samples in a row show a queue of half the min RTT) -> Drain
// (0.35, until in flight <= BDP) -> ProbeBW, a cycle of Down (0.9, until in flight <= BDP), Cruise
// (1.0, for 2-3 s or min(BDP in packets / 2, 63) round trips), Refill (1.0, one round trip), Up
// (1.25, until in flight reaches 1.25 BDP); and every 5 s without a lower RTT, ProbeRTT (in flight
// max(4 packets, BDP / 2) for 200 ms and a round trip).
//
// Loss: a round trip's loss is a congestion signal only when it exceeds 2 % of what the round
// delivered AND the round's mean RTT rose above the minimum by max(min RTT / 8, 2 ms): a queue that
// overflows fills first, so congestive loss comes with a rising RTT; random loss (radio, a busy
// Wi-Fi) does not. Such a round sets inflight_hi (the in-flight level that overflowed) in Startup
// and ProbeBW Up, and lowers the short-term bounds bw_lo / inflight_lo (to the latest round's
// delivery, or 0.7 of themselves) elsewhere; Refill lifts the short-term bounds, Up raises
// inflight_hi (1, 2, 4... packets per round trip; while inflight_hi holds the window and the
// rounds lose nothing, Up goes on past 1.25 BDP). A round in Cruise (or, once, in Down after 3
// rounds) whose every RTT sample stayed above the minimum by that margin sets bw_lo (and, if the
// window did not limit the round, the max filter) to what the round delivered and drains in Down:
// a standing queue means the estimate is above this flow's share. See docs/reliable-udp.md.
//
// Not thread-safe; O(1) per call, no allocation.
class Bbr final : public ICongestionController {
 public:
  // `seed`: the start of the random probe waits; flows sharing a bottleneck should differ in it
  // (0 is taken as a fixed non-zero seed: the generator would stay at 0).
  Bbr(std::size_t maxDatagramSize, std::uint32_t seed);
  // The pacing rate a new controller starts with (bytes per second).
  static double InitialPacingRate(std::size_t maxDatagramSize) noexcept;

  void OnPacketSent(SentPacket& packet, std::uint64_t bytesInFlight) noexcept override;
  void OnPacketAcked(const SentPacket& packet, Microseconds now) noexcept override;
  bool OnPacketsLost(Microseconds largestLostSentTime, std::uint64_t lostBytes,
                     Microseconds now) noexcept override;
  void OnPersistentCongestion() noexcept override;
  void OnAckProcessed(const AckEvent& ack) noexcept override;
  void OnInFlightDiscarded() noexcept override;
  void OnApplicationLimited(std::uint64_t bytesInFlight) noexcept override;
  double PacingRate() const noexcept override { return m_pacingRate; }

  std::uint64_t Window() const noexcept override { return m_cwnd; }
  bool LimitsSending() const noexcept override { return true; }
  const CongestionStatistics& Statistics() const noexcept override { return m_stats; }

  CongestionPhase Phase() const noexcept { return m_phase; }
  // Bytes per second: min(max_bw, bw_lo); 0 before the first sample.
  double Bandwidth() const noexcept;
  double MaxBandwidth() const noexcept;
  Microseconds MinRtt() const noexcept { return m_minRtt; }             // 0 before the first sample
  std::uint64_t InflightHigh() const noexcept { return m_inflightHi; }  // UINT64_MAX: unset

 private:
  std::uint64_t Bdp(double bandwidth, double gain) const noexcept;
  std::uint64_t MinimumWindow() const noexcept;
  void EnterPhase(CongestionPhase phase, Microseconds now) noexcept;
  void UpdateMinRtt(Microseconds rtt, Microseconds now) noexcept;
  void UpdateBandwidth(const RateSample& sample) noexcept;
  void OnRoundEnd(Microseconds now) noexcept;  // before the phase checks of the ACK ending it
  bool RoundIsCongested() const noexcept;
  bool RoundRttRose() const noexcept;      // the round's mean RTT rose by the queue signal's margin
  double RandomLossRate() const noexcept;  // the path's loss rate without a queue (learned)
  void LearnRandomLoss() noexcept;         // at a round's end
  bool RoundKeptQueue() const noexcept;    // its every RTT sample above the minimum: a queue stood
  void OnStandingQueue(Microseconds now) noexcept;
  void OnCongestion(Microseconds now) noexcept;
  void CheckStartupDone() noexcept;
  void CheckStartupQueue(Microseconds queuedRtt) noexcept;
  void AdvanceProbeBw(Microseconds now) noexcept;
  void CheckProbeRtt(Microseconds now) noexcept;
  void ResetLowerBounds() noexcept;
  void StartProbeBwDown(Microseconds now) noexcept;
  void UpdatePacingRate() noexcept;
  void UpdateWindow(std::uint64_t ackedBytes) noexcept;
  double PacingGain() const noexcept;
  double WindowGain() const noexcept;
  std::uint32_t NextRandom() noexcept;

  std::size_t m_maxDatagramSize;
  DeliveryRateSampler m_sampler;
  CongestionPhase m_phase = CongestionPhase::Startup;
  Microseconds m_phaseStart = 0;
  Microseconds m_accountedUntil = 0;  // phase time accounted up to here
  std::uint64_t m_cwnd;
  double m_pacingRate = 0;  // bytes per second
  std::uint64_t m_bytesInFlight = 0;
  std::uint64_t m_ackedBytes = 0;  // in the ACK being processed

  // Rounds: a round trip ends when a packet sent after it began is acknowledged.
  std::uint64_t m_nextRoundDelivered = 0;
  bool m_roundEnds = false;  // the ACK being processed ends the round
  std::uint64_t m_roundCount = 0;
  std::uint64_t m_roundDelivered = 0;  // acked bytes in the current round
  std::uint64_t m_roundLost = 0;       // lost bytes in the current round
  unsigned m_roundLossEvents = 0;      // batches of losses declared in the current round
  Microseconds m_roundRttSum = 0;      // RTT samples (less the peer's ACK delay) in the round
  unsigned m_roundRttSamples = 0;
  Microseconds m_roundMinRtt = UINT64_MAX;  // the smallest of those samples
  Microseconds m_roundStart = 0;
  std::uint64_t m_roundMaxInflight = 0;
  bool m_roundCongested = false;  // this round's congestion was already acted on
  // Lost and sent bytes of rounds without a queue, moving averages (RandomLossRate).
  double m_randomLossLost = 0;
  double m_randomLossFlight = 0;

  // The model.
  double m_maxBw[2] = {0, 0};  // the largest sample in this and the previous ProbeBW cycle
  double m_bwLatest = 0;       // the largest sample in the last round
  std::uint64_t m_inflightLatest = 0;
  double m_bwLo = 0;                        // 0: unset
  std::uint64_t m_inflightLo = UINT64_MAX;  // UINT64_MAX: unset
  std::uint64_t m_inflightHi = UINT64_MAX;
  std::uint64_t m_inflightHiGrowth = 0;  // packets Up adds to inflight_hi next round
  bool m_upHeldByInflightHi = false;     // inflight_hi was the window of the last Up round
  bool m_cutInDown = false;              // this Down phase already paced down to a round's delivery
  std::uint64_t m_lastCutRound = 0;      // the round of the last standing-queue cut
  double m_downCutFloor = 0;  // the lowest bw_lo this Down phase's standing-queue cuts may set
  Microseconds m_lastLossRoundEnd = 0;  // when the last round that lost a packet ended; 0: none
  Microseconds m_minRtt = 0;
  Microseconds m_minRttStamp = 0;
  Microseconds m_probeRttMin = 0;
  Microseconds m_probeRttMinStamp = 0;
  bool m_probeRttExpired = false;  // the 5 s minimum was stale at the last sample
  bool m_resetLatest = true;       // the next sample starts the round's bw/inflight_latest
  bool m_lastSampleAppLimited = false;

  // Startup.
  bool m_filledPipe = false;
  double m_fullBw = 0;
  unsigned m_fullBwRounds = 0;
  unsigned m_startupQueuedSamples = 0;  // RTT samples in a row that saw a queue

  // ProbeBW.
  Microseconds m_cycleStart = 0;
  Microseconds m_probeWait = 0;
  std::uint64_t m_cycleStartRound = 0;
  std::uint64_t m_phaseStartRound = 0;

  // ProbeRTT.
  Microseconds m_probeRttDone = 0;  // 0: in flight not yet down to the ProbeRTT window
  std::uint64_t m_probeRttRound = 0;

  std::uint32_t m_random;  // xorshift32 state, never 0
  CongestionStatistics m_stats;
};

}  // namespace timerwheel::rudp::detail
