// Bbr: the model, its phases and its bounds (see Bbr.h and docs/reliable-udp.md).
#include "ReliableUDP/Detail/Bbr.h"

#include <algorithm>

#include "ReliableUDP/Detail/NewReno.h"

namespace timerwheel::rudp::detail {
namespace {

// Gains (draft-ietf-ccwg-bbr 4.6, the BBRv3 values).
constexpr double kStartupPacingGain = 2.77;  // 4 ln 2: doubles the delivery rate each round trip
constexpr double kDrainPacingGain = 0.35;    // about 1 / 2.77: drains Startup's queue in a round
constexpr double kDownPacingGain = 0.9;
constexpr double kUpPacingGain = 1.25;
constexpr double kWindowGain = 2.0;     // room for ACK aggregation and delayed ACKs
constexpr double kUpWindowGain = 2.25;  // lets Up put its extra quarter BDP in flight
constexpr double kPacingMargin = 0.01;  // pace 1 % under the estimate, so no queue builds at it
// Loss (draft 4.7.3): a round whose loss is above 2 % of what it delivered is too lossy; the
// short-term bounds shrink to 0.7 of themselves (or to the latest delivery, if that is more);
// between probes the window keeps 15 % below inflight_hi, room for other flows.
constexpr double kLossThreshold = 0.02;
// A path that loses at random (radio, a lossy link before the bottleneck) loses that share of
// every round, congested or not; the threshold is 2 % above that rate and half again of it (a
// round of 100 packets at 5 % loses 5 +- 2.2), or a host that lifts one round's RTT (a relay or a
// sender not scheduled for 10 ms) makes random loss congestive. The rate is learned over rounds
// whose mean RTT did not rise (their loss is not a queue's), weighted by their bytes, with a gain
// of 1/8 a round; only rounds of kRandomLossMinPackets or more count (a round of a few packets
// says little of a rate).
constexpr double kRandomLossAllowance = 1.5;
constexpr double kRandomLossGain = 1.0 / 8;
constexpr std::uint64_t kRandomLossMinPackets = 16;
constexpr double kBeta = 0.7;
constexpr double kHeadroom = 0.85;
// The rise of a round's mean RTT that marks its loss as congestive: max(min RTT / 8, 2 ms) (a
// quarter-BDP probe queues min RTT / 4 at its end). The floor keeps jitter and delayed ACKs on a
// short path from looking like a queue.
constexpr Microseconds kQueueRttDivisor = 8;
constexpr Microseconds kQueueRttFloor = 2'000;
constexpr unsigned kStartupLossEvents = 6;  // BBRStartupFullLossCnt
// Startup also ends on its own queue: this many RTT samples in a row (RFC 9406's N_RTT_SAMPLE)
// each above the minimum by max(min RTT / 2, 2 ms). Half the min RTT is where bufferbloat starts
// (an RTT of 1.5x the base); a smaller rise would also end a newcomer's Startup on the queue that
// a flow already there keeps in a shallow buffer, below its fair share.
constexpr unsigned kStartupQueueSamples = 8;
constexpr Microseconds kStartupQueueRttDivisor = 2;
// A standing queue (a whole round whose every RTT sample is that far above the minimum) in Cruise,
// or in Down after this many rounds, paces at what the round delivered (OnStandingQueue). In Down
// that happens once, or, when no round lost a packet in the last kLossFreeBeforeRepeatedCuts, again
// every kDownRoundsBeforeCut rounds (RoundKeptQueue).
constexpr std::uint64_t kDownRoundsBeforeCut = 3;
constexpr Microseconds kLossFreeBeforeRepeatedCuts = 3'000'000;
// Startup ends when the bandwidth grew less than 25 % in 3 round trips (draft 4.3.1.2).
constexpr double kFullBandwidthGrowth = 1.25;
constexpr unsigned kFullBandwidthRounds = 3;
// Min RTT (draft 4.3.4, 4.7.4): kept 10 s; ProbeRTT when none lower was seen in 5 s, for 200 ms.
constexpr Microseconds kMinRttWindow = 10'000'000;
constexpr Microseconds kProbeRttInterval = 5'000'000;
constexpr Microseconds kProbeRttDuration = 200'000;
// ProbeBW's cycle (draft 4.3.3.5): Up every 2-3 s, or sooner, after min(BDP in packets / 2, 63)
// round trips. The draft waits min(BDP in packets, 63), so that a Reno flow sharing the
// bottleneck gets to grow its window back; half that is still Reno's own period (a halved window
// of W packets takes W / 2 round trips to grow back). The count is the flow's own BDP, so the flow
// with the smaller share probes sooner, and a probe gains a small flow more of its rate than a
// large one (at 1.25x, 1.25 C / (C + 0.25 r) of its rate r, on a bottleneck of C): the shares
// converge by the small flow's probes. At the draft's count they came too seldom: two flows through
// one 50 Mbit/s bottleneck came within 20 % of each other within 5 s in 35 and 36 of 60 simulated
// seeds (64 KB and 1 MB queues), at half of it in 59 and 60 (Perf/RESULTS.md, issue 17).
constexpr Microseconds kProbeWaitBase = 2'000'000;
constexpr Microseconds kProbeWaitRandom = 1'000'000;
constexpr std::uint64_t kRenoRoundsDivisor = 2;
constexpr std::uint64_t kMaxRenoRounds = 63;
constexpr std::uint64_t kMinWindowPackets = 4;
constexpr std::uint64_t kQuantizationPackets = 3;  // send-quantum allowance in the window
constexpr std::uint64_t kMaxInflightHiGrowthPackets = 1 << 16;

bool IsProbingBandwidth(CongestionPhase phase) {
  return phase == CongestionPhase::ProbeBwRefill || phase == CongestionPhase::ProbeBwUp;
}

bool IsProbeBw(CongestionPhase phase) {
  return phase == CongestionPhase::ProbeBwDown || phase == CongestionPhase::ProbeBwCruise ||
         phase == CongestionPhase::ProbeBwRefill || phase == CongestionPhase::ProbeBwUp;
}

}  // namespace

Bbr::Bbr(std::size_t maxDatagramSize, std::uint32_t seed)
    : m_maxDatagramSize(maxDatagramSize),
      m_cwnd(NewReno::InitialWindow(maxDatagramSize)),
      m_pacingRate(InitialPacingRate(maxDatagramSize)),
      m_random(seed != 0 ? seed : 0x9e3779b9u) {}

double Bbr::InitialPacingRate(std::size_t maxDatagramSize) noexcept {
  // Draft 4.6.2: before any RTT sample, the initial window over 1 ms, at the Startup gain.
  return kStartupPacingGain * static_cast<double>(NewReno::InitialWindow(maxDatagramSize)) * 1e6 /
         1000.0;
}

// ---- Events ----

void Bbr::OnPacketSent(SentPacket& packet, std::uint64_t bytesInFlight) noexcept {
  if (m_accountedUntil == 0) {
    m_accountedUntil = packet.timeSent;
    m_phaseStart = packet.timeSent;
    m_cycleStart = packet.timeSent;
  }
  m_sampler.OnPacketSent(packet, bytesInFlight, packet.timeSent);
  m_bytesInFlight = bytesInFlight;
  m_roundMaxInflight = std::max(m_roundMaxInflight, bytesInFlight);
}

void Bbr::OnPacketAcked(const SentPacket& packet, Microseconds now) noexcept {
  m_sampler.OnPacketAcked(packet, now);
  m_ackedBytes += packet.size;
  m_roundDelivered += packet.size;
  // A packet sent after the round began has been delivered: the round trip is over.
  if (packet.delivered >= m_nextRoundDelivered) m_roundEnds = true;
}

bool Bbr::OnPacketsLost(Microseconds /*largestLostSentTime*/, std::uint64_t lostBytes,
                        Microseconds /*now*/) noexcept {
  // Judged per round trip in OnAckProcessed: one loss is not yet a signal.
  m_roundLost += lostBytes;
  ++m_roundLossEvents;
  return false;
}

void Bbr::OnPersistentCongestion() noexcept {
  // RFC 9002 7.6.2: nothing got through for 3 PTOs; start again from the minimum window (it grows
  // back by what is acknowledged, up to the model's BDP).
  m_cwnd = MinimumWindow();
  ++m_stats.persistentCongestion;
}

void Bbr::OnInFlightDiscarded() noexcept {
  m_sampler.OnInFlightDiscarded();
  m_bytesInFlight = 0;
  m_ackedBytes = 0;
}

void Bbr::OnApplicationLimited(std::uint64_t bytesInFlight) noexcept {
  // Only if the window is not what limits sending (it would be, if in flight filled it).
  if (bytesInFlight < m_cwnd) m_sampler.OnApplicationLimited(bytesInFlight);
}

void Bbr::OnAckProcessed(const AckEvent& ack) noexcept {
  const Microseconds now = ack.now;
  if (m_accountedUntil != 0 && now > m_accountedUntil) {
    m_stats.phaseMicroseconds[static_cast<unsigned>(m_phase)] += now - m_accountedUntil;
    m_accountedUntil = now;
  }
  m_bytesInFlight = ack.bytesInFlight;
  if (ack.hasRttSample) {
    UpdateMinRtt(ack.latestRtt, now);
    // The queue signal leaves out the time the peer held the ACK: at a low rate a delayed ACK
    // would otherwise look like a queue, and loss then like congestion.
    const Microseconds queued =
        ack.latestRtt >= m_minRtt + ack.ackDelay ? ack.latestRtt - ack.ackDelay : m_minRtt;
    m_roundRttSum += queued;
    ++m_roundRttSamples;
    m_roundMinRtt = std::min(m_roundMinRtt, queued);
    if (m_phase == CongestionPhase::Startup) CheckStartupQueue(queued);
  }
  UpdateBandwidth(m_sampler.TakeSample(m_minRtt));
  // Startup and a bandwidth probe stop at once on congestion; between probes the short-term
  // bounds adapt once the round is complete, judged on the whole round (its delivery and its
  // mean RTT are then known; a few samples early in a round are one hiccup's worth).
  const bool probing = m_phase == CongestionPhase::Startup || IsProbingBandwidth(m_phase);
  if (probing && !m_roundCongested && RoundIsCongested()) {
    m_roundCongested = true;
    OnCongestion(now);
  }
  if (m_roundEnds) {
    LearnRandomLoss();
    if (!probing && RoundIsCongested()) {
      m_roundCongested = true;
      OnCongestion(now);
    }
    if (RoundKeptQueue()) OnStandingQueue(now);
    OnRoundEnd(now);
  }

  if (m_phase == CongestionPhase::Startup && m_filledPipe) EnterPhase(CongestionPhase::Drain, now);
  if (m_phase == CongestionPhase::Drain && m_bytesInFlight <= Bdp(Bandwidth(), 1.0)) {
    StartProbeBwDown(now);
  }
  if (IsProbeBw(m_phase)) AdvanceProbeBw(now);
  CheckProbeRtt(now);

  UpdatePacingRate();
  UpdateWindow(m_ackedBytes);
  m_ackedBytes = 0;
  m_stats.bandwidthEstimate = static_cast<std::uint64_t>(Bandwidth());
  m_stats.minRttEstimate = m_minRtt;
}

// ---- The model ----

double Bbr::MaxBandwidth() const noexcept { return std::max(m_maxBw[0], m_maxBw[1]); }

double Bbr::Bandwidth() const noexcept {
  const double maxBw = MaxBandwidth();
  return m_bwLo > 0 ? std::min(maxBw, m_bwLo) : maxBw;
}

std::uint64_t Bbr::Bdp(double bandwidth, double gain) const noexcept {
  if (m_minRtt == 0 || bandwidth <= 0) return NewReno::InitialWindow(m_maxDatagramSize);
  return static_cast<std::uint64_t>(gain * bandwidth * static_cast<double>(m_minRtt) / 1e6);
}

std::uint64_t Bbr::MinimumWindow() const noexcept {
  return kMinWindowPackets * std::uint64_t{m_maxDatagramSize};
}

void Bbr::UpdateMinRtt(Microseconds rtt, Microseconds now) noexcept {
  // Draft 4.7.4: the 5 s minimum restarts from any sample once it is stale, which is also what
  // sends the connection to ProbeRTT (CheckProbeRtt), so the expiry is noted before the update.
  rtt = std::max<Microseconds>(rtt, 1);
  m_probeRttExpired = m_probeRttMinStamp != 0 && now > m_probeRttMinStamp + kProbeRttInterval;
  if (m_probeRttMin == 0 || rtt < m_probeRttMin || m_probeRttExpired) {
    m_probeRttMin = rtt;
    m_probeRttMinStamp = now;
  }
  const bool minRttExpired = now > m_minRttStamp + kMinRttWindow;
  if (m_minRtt == 0 || m_probeRttMin < m_minRtt || minRttExpired) {
    m_minRtt = m_probeRttMin;
    m_minRttStamp = m_probeRttMinStamp;
  }
}

void Bbr::UpdateBandwidth(const RateSample& sample) noexcept {
  const double rate = sample.Rate();
  if (rate <= 0) return;
  m_lastSampleAppLimited = sample.appLimited;
  if (m_resetLatest) {
    m_resetLatest = false;
    m_bwLatest = rate;
    m_inflightLatest = sample.delivered;
  } else {
    m_bwLatest = std::max(m_bwLatest, rate);
    m_inflightLatest = std::max(m_inflightLatest, sample.delivered);
  }
  // An app-limited sample shows the application's rate: it may raise the estimate (the path did
  // at least that), never lower it.
  if (!sample.appLimited || rate >= MaxBandwidth()) m_maxBw[0] = std::max(m_maxBw[0], rate);
}

bool Bbr::RoundIsCongested() const noexcept {
  if (m_roundLost == 0 || m_minRtt == 0) return false;
  // Over the round's flight: early in a round one loss must not look like all of it.
  const double flight =
      static_cast<double>(std::max(m_roundLost + m_roundDelivered, m_roundMaxInflight));
  const double lossRate = static_cast<double>(m_roundLost) / flight;
  if (lossRate <= kLossThreshold + kRandomLossAllowance * RandomLossRate()) return false;
  // Startup's own queue (it sends at 2.77x) raises the RTT whatever the loss is: there, random
  // loss must also not look like an overflow, so it takes several loss events (draft 4.3.1.3).
  if (m_phase == CongestionPhase::Startup && m_roundLossEvents < kStartupLossEvents) return false;
  // The round's mean RTT, not its highest: a full queue delays every packet, while a scheduling
  // hiccup at either end (a busy host) delays a few, and must not turn random loss into
  // congestion.
  return RoundRttRose();
}

double Bbr::RandomLossRate() const noexcept {
  return m_randomLossFlight > 0 ? m_randomLossLost / m_randomLossFlight : 0.0;
}

void Bbr::LearnRandomLoss() noexcept {
  // Before RoundIsCongested's verdict is known for the round: a round it judges congestive has a
  // risen RTT, so it is never one of these.
  const std::uint64_t flight = m_roundLost + m_roundDelivered;
  if (m_phase == CongestionPhase::Startup || m_roundRttSamples == 0 || RoundRttRose() ||
      flight < kRandomLossMinPackets * m_maxDatagramSize) {
    return;
  }
  m_randomLossLost += kRandomLossGain * (static_cast<double>(m_roundLost) - m_randomLossLost);
  m_randomLossFlight += kRandomLossGain * (static_cast<double>(flight) - m_randomLossFlight);
}

bool Bbr::RoundRttRose() const noexcept {
  if (m_roundRttSamples == 0 || m_minRtt == 0) return false;
  const Microseconds mean = m_roundRttSum / m_roundRttSamples;
  const Microseconds rise = std::max(m_minRtt / kQueueRttDivisor, kQueueRttFloor);
  return mean >= m_minRtt + rise;
}

void Bbr::OnCongestion(Microseconds now) noexcept {
  ++m_stats.congestionEvents;
  ++m_stats.congestiveLossRounds;
  switch (m_phase) {
    case CongestionPhase::Startup:
      // Draft 4.3.1.3: the queue overflowed before the bandwidth stopped growing; the pipe is
      // full, and what was in flight is the most it holds.
      m_filledPipe = true;
      m_inflightHi = std::max(Bdp(MaxBandwidth(), 1.0), m_inflightLatest);
      return;
    case CongestionPhase::ProbeBwRefill:
    case CongestionPhase::ProbeBwUp:
      // Draft 4.7.3.2: the probe overflowed the queue: that much in flight is too much.
      m_inflightHi = std::max<std::uint64_t>(
          m_inflightLatest,
          static_cast<std::uint64_t>(kBeta * static_cast<double>(m_roundMaxInflight)));
      m_inflightHi = std::max(m_inflightHi, MinimumWindow());
      StartProbeBwDown(now);
      return;
    default: {
      // Draft 4.7.3.3: between probes, back off for now (the short-term bounds), no further than
      // what the last round delivered.
      const double bwLo = m_bwLo > 0 ? m_bwLo : MaxBandwidth();
      m_bwLo = std::max(m_bwLatest, kBeta * bwLo);
      const std::uint64_t inflightLo = m_inflightLo != UINT64_MAX ? m_inflightLo : m_cwnd;
      m_inflightLo = std::max<std::uint64_t>(
          m_inflightLatest, static_cast<std::uint64_t>(kBeta * static_cast<double>(inflightLo)));
      return;
    }
  }
}

bool Bbr::RoundKeptQueue() const noexcept {
  // Only a round spent wholly in Cruise says what the bottleneck gives at the estimate. In Down,
  // only once, and only after kDownRoundsBeforeCut rounds: by then the queue of the probe before
  // it is gone (Down drains a tenth of the BDP a round), so a queue still there is someone
  // else's or a sign the estimate is high; cutting sooner would take back what the probe found.
  if (m_phase == CongestionPhase::ProbeBwCruise) {
    if (m_roundCount <= m_phaseStartRound) return false;
  } else if (m_phase == CongestionPhase::ProbeBwDown) {
    // A second cut in one Down phase only when the path has lost nothing for a while. A
    // loss-based flow (Reno, CUBIC) keeps a queue whatever this flow does, and fills it until a
    // packet drops: cut after cut there would hand it the bottleneck (simulated, 64 KB queue: one
    // Bbr flow beside one NewReno flow kept about 30 % of it with every Down round cutting, about
    // 50 % with this rule, as with one cut). Where nothing is lost the queue is flows like this
    // one, and one cut may not be enough: when ACKs come unevenly (2 ms of jitter on the ACK path,
    // a host that stalls), the samples of a flow larger than its share keep its estimate high, so
    // its flight stays above the BDP and it stays in Down; with one cut per Down phase, two Bbr
    // flows through a 1 MB queue came within 20 % within 5 s in 42-44 of 60 seeds, with a cut
    // every kDownRoundsBeforeCut rounds in 58-59 (Perf/RESULTS.md, issue 17).
    const bool recentLoss =
        m_roundLost > 0 || (m_lastLossRoundEnd != 0 &&
                            m_roundStart < m_lastLossRoundEnd + kLossFreeBeforeRepeatedCuts);
    if (m_cutInDown && recentLoss) return false;
    const std::uint64_t after = m_cutInDown ? m_lastCutRound : m_phaseStartRound;
    if (m_roundCount <= after + kDownRoundsBeforeCut) return false;
  } else {
    return false;
  }
  if (m_roundRttSamples == 0 || m_minRtt == 0 || m_lastSampleAppLimited) return false;
  const Microseconds rise = std::max(m_minRtt / kQueueRttDivisor, kQueueRttFloor);
  return m_roundMinRtt >= m_minRtt + rise;
}

void Bbr::OnStandingQueue(Microseconds now) noexcept {
  ++m_stats.standingQueueRounds;
  // A whole round at gain 1 (or Down's 0.9) and the queue never emptied: the bottleneck gives
  // this flow less than the model says (the max filter holds a sample biased high, or other
  // flows' share grew). A saturated bottleneck's output is what the round delivered; pace at
  // that (bw_lo; at most the 30 % cut a lossy round makes, so that one stalled round does not
  // halt the flow), and drain (Down) what was queued. Once per Down phase where anything was lost
  // lately: a queue that a loss-based flow keeps must not ratchet the rate down round after round
  // (RoundKeptQueue). Refill lifts the bound again, and Up finds any bandwidth there is. This is
  // what keeps a flow whose max filter holds a high sample from keeping a BDP queued at its window
  // (the deep-queue RTT), and what makes a larger flow yield to a smaller one's probe (sharing).
  if (now > m_roundStart) {
    const double delivered =
        static_cast<double>(m_roundDelivered) * 1e6 / static_cast<double>(now - m_roundStart);
    const double bandwidth = Bandwidth();
    // All the cuts of one Down phase together take at most the 30 % one cut may: beside a flow
    // that keeps a deep queue without loss (NewReno through 1 MB), repeated cuts that each took
    // up to 30 % left Bbr 9-19 % of the link through the relay, where one cut left it 17-24 %.
    const bool firstCutOfDown = m_phase != CongestionPhase::ProbeBwDown || !m_cutInDown;
    if (firstCutOfDown) m_downCutFloor = kBeta * bandwidth;
    m_bwLo = std::min(bandwidth, std::max(delivered, m_downCutFloor));
    // The max filter too, unless the window limited the round: paced below its window at the
    // estimate, the flow still kept a queue, so the samples it holds (up to two cycles old) are
    // more than the path gives this flow now. Left in the filter, they came back at Refill, and a
    // larger flow held its share for two cycles: through a deep queue (no loss) two flows took
    // 7-9 s to come within 20 % (simulated). A window-limited round proves less: a path that got
    // longer (the 10 s min RTT still the old one) also looks like a standing queue, and cutting
    // the filter on each of those rounds would ratchet the rate down.
    if (m_roundMaxInflight + m_maxDatagramSize < m_cwnd) {
      m_maxBw[0] = std::min(m_maxBw[0], m_bwLo);
      m_maxBw[1] = std::min(m_maxBw[1], m_bwLo);
    }
  }
  if (m_phase != CongestionPhase::ProbeBwDown) EnterPhase(CongestionPhase::ProbeBwDown, now);
  m_cutInDown = true;
  m_lastCutRound = m_roundCount;
}

void Bbr::OnRoundEnd(Microseconds now) noexcept {
  if (m_phase == CongestionPhase::ProbeBwUp && m_inflightHi != UINT64_MAX && !m_roundCongested) {
    // Draft 4.7.3.2: what a probe round put in flight without congestion is safe.
    m_inflightHi = std::max(m_inflightHi, m_roundMaxInflight);
    m_upHeldByInflightHi = false;
    if (m_roundMaxInflight + m_maxDatagramSize >= m_cwnd) {
      // Draft 4.3.3.4: a window-limited Up round raises inflight_hi, by twice as much each
      // round, so that a large increase in capacity is found in a few round trips.
      m_upHeldByInflightHi = m_cwnd >= m_inflightHi && m_roundLost == 0;
      m_inflightHi += m_inflightHiGrowth * m_maxDatagramSize;
      m_inflightHiGrowth = std::min(2 * m_inflightHiGrowth, kMaxInflightHiGrowthPackets);
    }
  }
  if (m_roundLost > 0) m_lastLossRoundEnd = now;
  m_roundEnds = false;
  ++m_roundCount;
  m_nextRoundDelivered = m_sampler.Delivered();
  m_roundDelivered = 0;
  m_roundLost = 0;
  m_roundLossEvents = 0;
  m_roundRttSum = 0;
  m_roundRttSamples = 0;
  m_roundMinRtt = UINT64_MAX;
  m_roundStart = now;
  m_roundMaxInflight = m_bytesInFlight;
  m_roundCongested = false;
  m_resetLatest = true;
  if (m_phase == CongestionPhase::Startup) CheckStartupDone();
}

void Bbr::CheckStartupDone() noexcept {
  if (m_filledPipe || m_lastSampleAppLimited) return;
  const double maxBw = MaxBandwidth();
  if (maxBw >= m_fullBw * kFullBandwidthGrowth) {
    m_fullBw = maxBw;
    m_fullBwRounds = 0;
    return;
  }
  if (++m_fullBwRounds >= kFullBandwidthRounds) m_filledPipe = true;
}

void Bbr::CheckStartupQueue(Microseconds queuedRtt) noexcept {
  // With no loss (a deep buffer) Startup would otherwise end only when the bandwidth stops
  // growing, 3 round trips after the queue began, with its window (2 BDP) queueing a whole BDP.
  // A flow that is not using its window is not what fills the queue (and its RTT samples, a few
  // a second, are the host's scheduling as much as the path's): as for the bandwidth's plateau,
  // only samples of a flow that sends all it may count.
  if (m_filledPipe) return;
  if (m_sampler.AppLimited()) {
    m_startupQueuedSamples = 0;
    return;
  }
  const Microseconds rise = std::max(m_minRtt / kStartupQueueRttDivisor, kQueueRttFloor);
  if (queuedRtt < m_minRtt + rise) {
    m_startupQueuedSamples = 0;
    return;
  }
  if (++m_startupQueuedSamples < kStartupQueueSamples) return;
  // The pipe is full, and what is in flight now queued half a min RTT: the bound, as when a queue
  // overflows (OnCongestion), so that ProbeBW does not refill that queue at once; Up raises it.
  m_filledPipe = true;
  m_inflightHi = std::max(m_bytesInFlight, m_roundMaxInflight);
  ++m_stats.slowStartExitsOnDelay;
}

// ---- Phases ----

void Bbr::EnterPhase(CongestionPhase phase, Microseconds now) noexcept {
  m_phase = phase;
  m_phaseStart = now;
  m_phaseStartRound = m_roundCount;
  if (phase == CongestionPhase::ProbeBwRefill) ResetLowerBounds();
  if (phase == CongestionPhase::ProbeBwDown) m_cutInDown = false;
  if (phase == CongestionPhase::ProbeBwUp) {
    m_inflightHiGrowth = 1;
    m_upHeldByInflightHi = false;
  }
}

void Bbr::ResetLowerBounds() noexcept {
  m_bwLo = 0;
  m_inflightLo = UINT64_MAX;
}

void Bbr::StartProbeBwDown(Microseconds now) noexcept {
  EnterPhase(CongestionPhase::ProbeBwDown, now);
  // A new cycle: the bandwidth filter keeps this one's and the previous one's maximum.
  m_maxBw[1] = m_maxBw[0];
  m_maxBw[0] = 0;
  m_cycleStart = now;
  m_cycleStartRound = m_roundCount;
  m_probeWait = kProbeWaitBase + NextRandom() % kProbeWaitRandom;
}

void Bbr::AdvanceProbeBw(Microseconds now) noexcept {
  const std::uint64_t bdp = Bdp(Bandwidth(), 1.0);
  // A BDP of one packet still waits a round, as at the draft's count. (Rounding every count up
  // instead made sharing worse: 54 and 55 of the 60 seeds within 5 s, a Jain index of 0.947.)
  const std::uint64_t bdpPackets = bdp / std::uint64_t{m_maxDatagramSize};
  const std::uint64_t renoRounds =
      std::min(kMaxRenoRounds,
               std::max(bdpPackets / kRenoRoundsDivisor, std::min<std::uint64_t>(bdpPackets, 1)));
  const bool timeToProbe =
      now >= m_cycleStart + m_probeWait || m_roundCount >= m_cycleStartRound + renoRounds;
  switch (m_phase) {
    case CongestionPhase::ProbeBwDown: {
      if (timeToProbe) {
        EnterPhase(CongestionPhase::ProbeBwRefill, now);
        return;
      }
      std::uint64_t target = bdp;
      if (m_inflightHi != UINT64_MAX) {
        target = std::min<std::uint64_t>(
            target, static_cast<std::uint64_t>(kHeadroom * static_cast<double>(m_inflightHi)));
      }
      if (m_bytesInFlight <= target) EnterPhase(CongestionPhase::ProbeBwCruise, now);
      return;
    }
    case CongestionPhase::ProbeBwCruise:
      if (timeToProbe) EnterPhase(CongestionPhase::ProbeBwRefill, now);
      return;
    case CongestionPhase::ProbeBwRefill:
      if (m_roundCount > m_phaseStartRound) EnterPhase(CongestionPhase::ProbeBwUp, now);
      return;
    case CongestionPhase::ProbeBwUp:
      if (m_roundCount <= m_phaseStartRound) return;
      // The probe put a quarter BDP more in flight (and the rate did not follow: a queue), or
      // the application stopped using the window: probing is over. Unless inflight_hi held the
      // last round's window and the round met no sign of the bottleneck (no loss, no rise of
      // the RTT): then what is in flight says nothing about the rate yet (another flow's queue
      // may make it look large), and the probe goes on, raising inflight_hi 1, 2, 4... packets
      // a round, until a round meets loss or a queue, or the bound no longer holds the window.
      // This is how a flow that started (or met loss) beside a larger one grows its bound back
      // to its share within a few round trips. (On a randomly lossy path every round has loss:
      // there Up ends as before.)
      if (m_upHeldByInflightHi && !m_sampler.AppLimited()) return;
      if (m_bytesInFlight >= Bdp(MaxBandwidth(), kUpPacingGain) || m_sampler.AppLimited()) {
        StartProbeBwDown(now);
      }
      return;
    default:
      return;
  }
}

void Bbr::CheckProbeRtt(Microseconds now) noexcept {
  if (m_phase != CongestionPhase::ProbeRtt) {
    if (!m_probeRttExpired || m_phase == CongestionPhase::Startup) return;
    EnterPhase(CongestionPhase::ProbeRtt, now);
    m_probeRttDone = 0;
    return;
  }
  const std::uint64_t target = std::max(MinimumWindow(), Bdp(Bandwidth(), 0.5));
  if (m_probeRttDone == 0) {
    if (m_bytesInFlight <= target) {
      m_probeRttDone = now + kProbeRttDuration;
      m_probeRttRound = m_roundCount;
    }
    return;
  }
  if (now < m_probeRttDone || m_roundCount <= m_probeRttRound) return;
  // Draft 4.3.4.5: the queue was empty for 200 ms and a round trip: the minimum is fresh.
  m_probeRttMinStamp = now;
  m_probeRttExpired = false;
  ResetLowerBounds();
  if (!m_filledPipe) {
    m_startupQueuedSamples = 0;
    EnterPhase(CongestionPhase::Startup, now);
    return;
  }
  StartProbeBwDown(now);
  EnterPhase(CongestionPhase::ProbeBwCruise, now);
}

// ---- Rate and window ----

double Bbr::PacingGain() const noexcept {
  switch (m_phase) {
    case CongestionPhase::Startup:
      return kStartupPacingGain;
    case CongestionPhase::Drain:
      return kDrainPacingGain;
    case CongestionPhase::ProbeBwDown:
      return kDownPacingGain;
    case CongestionPhase::ProbeBwUp:
      return kUpPacingGain;
    default:
      return 1.0;
  }
}

double Bbr::WindowGain() const noexcept {
  return m_phase == CongestionPhase::ProbeBwUp ? kUpWindowGain : kWindowGain;
}

void Bbr::UpdatePacingRate() noexcept {
  const double bandwidth = Bandwidth();
  double rate = 0;
  if (bandwidth > 0) {
    rate = PacingGain() * bandwidth * (1.0 - kPacingMargin);
  } else if (m_minRtt > 0) {
    rate = kStartupPacingGain * static_cast<double>(m_cwnd) * 1e6 / static_cast<double>(m_minRtt);
  } else {
    return;
  }
  // Draft 4.6.2: in Startup the rate only rises (a low early sample must not slow the ramp).
  if (m_filledPipe || rate > m_pacingRate) m_pacingRate = rate;
}

void Bbr::UpdateWindow(std::uint64_t ackedBytes) noexcept {
  const double bandwidth = Bandwidth();
  if (bandwidth > 0 && m_minRtt > 0) {
    std::uint64_t target =
        Bdp(bandwidth, WindowGain()) + kQuantizationPackets * std::uint64_t{m_maxDatagramSize};
    if (m_phase == CongestionPhase::ProbeBwUp) target += 2 * std::uint64_t{m_maxDatagramSize};
    if (m_filledPipe) {
      m_cwnd = std::min(m_cwnd + ackedBytes, target);
    } else if (m_cwnd < target) {
      m_cwnd += ackedBytes;  // Startup: grows as slow start does, up to the model's window
    }
  } else {
    m_cwnd += ackedBytes;  // no model yet: slow start
  }
  // The bounds: inflight_hi (with headroom for other flows between probes), inflight_lo, and
  // ProbeRTT's small window.
  std::uint64_t cap = m_inflightLo;
  if (m_inflightHi != UINT64_MAX) {
    const std::uint64_t hi =
        IsProbingBandwidth(m_phase)
            ? m_inflightHi
            : static_cast<std::uint64_t>(kHeadroom * static_cast<double>(m_inflightHi));
    cap = std::min(cap, hi);
  }
  if (m_phase == CongestionPhase::ProbeRtt) {
    cap = std::min(cap, std::max(MinimumWindow(), Bdp(bandwidth, 0.5)));
  }
  m_cwnd = std::max(std::min(m_cwnd, cap), MinimumWindow());
}

std::uint32_t Bbr::NextRandom() noexcept {
  // xorshift32: the probe wait only has to differ between cycles (and flows), not be secure.
  m_random ^= m_random << 13;
  m_random ^= m_random >> 17;
  m_random ^= m_random << 5;
  return m_random;
}

}  // namespace timerwheel::rudp::detail
