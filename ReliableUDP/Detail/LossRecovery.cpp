// LossRecovery: RFC 9002 loss detection, RTT estimation, NewReno and a token-bucket pacer.
#include "ReliableUDP/Detail/LossRecovery.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace timerwheel::rudp::detail {

namespace {

// Lost records are kept this many PTOs (without backoff): long enough for a late ACK, reordered
// or delayed, to reveal that a loss was spurious (Statistics().spuriousLosses).
constexpr Microseconds kLostRecordKeepPtos = 3;
// Beyond this many records, the oldest Lost ones are forgotten even if still young.
constexpr std::size_t kMaxRecords = std::size_t{1} << 16;
// Small: every connection, idle ones included, has a ring (keepalive PINGs are recorded).
constexpr std::size_t kInitialRingCapacity = 4;

// RFC 9002 7.7: the pacer sends at 1.25 times cwnd per RTT so that it does not itself limit
// throughput; the burst covers 4 ms so a 1 ms-granularity timer can keep up. Slow start uses the
// same gain: neither RFC 9002 7.7 nor RFC 9406 (which only has a paced sender use L = infinity)
// asks for another; the 2x some stacks pace slow start at is Linux's tcp_pacing_ss_ratio.
constexpr double kPacingGain = 1.25;
constexpr double kPacingBurstMicroseconds = 4000.0;
constexpr std::size_t kPacingBurstPackets = 10;
// Floating-point slack when comparing tokens with a packet's size.
constexpr double kPacingEpsilon = 1e-6;

// HyStart++ constants, the values RFC 9406 4.3 recommends.
constexpr Microseconds kMinRttThresh = 4000;
constexpr Microseconds kMaxRttThresh = 16000;
constexpr Microseconds kMinRttDivisor = 8;
constexpr unsigned kNRttSample = 8;
constexpr std::uint64_t kCssGrowthDivisor = 4;
constexpr unsigned kCssRounds = 5;
// RFC 9406 4.2-4.3: an unpaced sender limits growth per ACK to L * mds, with L = 8, against
// bursts; a paced one uses L = infinity.
constexpr std::uint64_t kUnpacedGrowthLimitDatagrams = 8;
// The RFC's "infinity" for the round minimum RTTs.
constexpr Microseconds kNoRtt = std::numeric_limits<Microseconds>::max();

std::uint64_t InitialWindow(std::size_t mds) {
  // RFC 9002 7.2.
  return std::min<std::uint64_t>(10 * std::uint64_t{mds},
                                 std::max<std::uint64_t>(14720, 2 * std::uint64_t{mds}));
}

// The RTT the pacer spreads a window over (RFC 9002 7.7); never 0, loopback samples can be.
Microseconds PacingRtt(bool hasSample, Microseconds smoothed) {
  return hasSample ? std::max<Microseconds>(smoothed, 1) : kInitialRtt;
}

}  // namespace

LossRecovery::LossRecovery(const LossRecoveryOptions& options) : m_options(options) {
  assert(m_options.maxDatagramSize > 0);
  m_stats.congestionWindow = InitialWindow(m_options.maxDatagramSize);
  // The bucket starts full so the initial window may go out as one burst.
  m_pacingTokens = PacingCapacity();
}

void LossRecovery::SetPeerMaxAckDelay(Microseconds maxAckDelay) noexcept {
  m_peerMaxAckDelay = maxAckDelay;
}

// ---- The ring of sent packets ----

LossRecovery::Record& LossRecovery::At(std::size_t index) noexcept {
  return m_ring[(m_head + index) & (m_ring.size() - 1)];
}

const LossRecovery::Record& LossRecovery::At(std::size_t index) const noexcept {
  return m_ring[(m_head + index) & (m_ring.size() - 1)];
}

std::size_t LossRecovery::LowerBound(PacketNumber pn) const noexcept {
  std::size_t low = 0;
  std::size_t high = m_count;
  while (low < high) {
    const std::size_t mid = low + (high - low) / 2;
    if (At(mid).packet.packetNumber < pn) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low;
}

void LossRecovery::Push(const SentPacket& packet) {
  // Bound the memory spent on remembering losses: forget the oldest settled records first.
  while (m_count >= kMaxRecords && At(0).state != Record::State::Outstanding) PopFront();
  if (m_count == m_ring.size()) {
    // Grow by doubling, unrolling the ring so that index 0 is the oldest record again.
    std::vector<Record> grown(std::max(kInitialRingCapacity, m_ring.size() * 2));
    for (std::size_t i = 0; i < m_count; ++i) grown[i] = At(i);
    m_ring.swap(grown);
    m_head = 0;
  }
  Record& record = m_ring[(m_head + m_count) & (m_ring.size() - 1)];
  record.packet = packet;
  record.lostTime = 0;
  record.state = Record::State::Outstanding;
  ++m_count;
}

void LossRecovery::PopFront() noexcept {
  m_head = (m_head + 1) & (m_ring.size() - 1);
  --m_count;
}

void LossRecovery::TrimFront(Microseconds now) noexcept {
  const Microseconds keep = kLostRecordKeepPtos * ProbeTimeout();
  while (m_count > 0) {
    const Record& front = At(0);
    const bool forget = front.state == Record::State::Acked ||
                        (front.state == Record::State::Lost && now >= front.lostTime + keep);
    if (!forget) break;
    PopFront();
  }
}

void LossRecovery::AdvanceHints() noexcept {
  std::size_t i = LowerBound(m_firstOutstanding);
  while (i < m_count && At(i).state != Record::State::Outstanding) ++i;
  m_firstOutstanding = i < m_count ? At(i).packet.packetNumber : m_nextPacketNumber;
  i = LowerBound(m_firstUnacked);
  while (i < m_count && At(i).state == Record::State::Acked) ++i;
  m_firstUnacked = i < m_count ? At(i).packet.packetNumber : m_nextPacketNumber;
}

// ---- Sending ----

void LossRecovery::OnPacketSent(const SentPacket& packet) {
  assert(packet.packetNumber >= m_nextPacketNumber);
  if (!packet.ackEliciting) {
    // RFC 9002 leaves ACK-only packets out of loss detection. Not recording them also bounds
    // the ring against a peer that sends PINGs but never acknowledges anything.
    m_nextPacketNumber = packet.packetNumber + 1;
    return;
  }
  // From here on every packet is ack-eliciting, and so in flight (this transport sends no
  // padding-only packets): every record in the ring counts toward bytes in flight.
  RefillPacer(packet.timeSent);
  m_pacingTokens -= static_cast<double>(packet.size);
  Push(packet);
  m_nextPacketNumber = packet.packetNumber + 1;
  m_stats.bytesInFlight += packet.size;
  m_inFlightHigh = std::max(m_inFlightHigh, m_stats.bytesInFlight);
  ++m_ackElicitingInFlight;
  m_lastAckElicitingSent = packet.timeSent;
}

bool LossRecovery::CanSend(std::size_t bytes) const noexcept {
  if (!m_options.congestionControl) return true;
  return m_stats.bytesInFlight + bytes <= m_stats.congestionWindow;
}

// ---- Acknowledgements (RFC 9002 A.7) ----

LossRecovery::AckResult LossRecovery::OnAckReceived(const AckFrame& ack, Microseconds now,
                                                    IPacketFate& fate) {
  const std::size_t rangeCount = std::min(ack.rangeCount, kMaxAckRanges);
  PacketNumber highest = ack.largest;
  for (std::size_t k = 0; k < rangeCount; ++k) highest = std::max(highest, ack.ranges[k].largest);
  // RFC 9000 13.1: acknowledging a packet never sent is a protocol violation (and the defence
  // against optimistic ACKs inflating the window). Checked before anything changes.
  if (highest >= m_nextPacketNumber) return AckResult::AckedUnsentPacket;

  RefillPacer(now);  // tokens earned so far accrue at the rate before this ACK changes it
  if (!m_anyAcked || highest > m_largestAcked) m_largestAcked = highest;
  m_anyAcked = true;

  // Ranges may repeat what earlier ACKs said, or name packets already forgotten: only records
  // not yet Acked count, and none below m_firstUnacked exist.
  bool newlyAcked = false;
  bool haveRttSample = false;
  Microseconds sampleSentTime = 0;
  std::uint64_t growthBytes = 0;
  for (std::size_t k = 0; k < rangeCount; ++k) {
    const AckRange& range = ack.ranges[k];
    if (range.smallest > range.largest) continue;
    const PacketNumber from = std::max(range.smallest, m_firstUnacked);
    for (std::size_t i = LowerBound(from); i < m_count; ++i) {
      Record& record = At(i);
      if (record.packet.packetNumber > range.largest) break;
      if (record.state == Record::State::Acked) continue;
      const bool wasLost = record.state == Record::State::Lost;
      record.state = Record::State::Acked;
      const SentPacket packet = record.packet;
      newlyAcked = true;
      ++m_stats.packetsAcked;
      if (wasLost) {
        // Already taken out of flight when declared lost.
        ++m_stats.spuriousLosses;
      } else {
        m_stats.bytesInFlight -= packet.size;
        // RFC 9002 7.3.2: no growth for packets sent before the current recovery period.
        if (!m_inRecovery || packet.timeSent > m_recoveryStart) growthBytes += packet.size;
        --m_ackElicitingInFlight;
      }
      // RFC 9002 5.1: sample only when the largest acknowledged is newly acknowledged and
      // ack-eliciting (every recorded packet is).
      if (packet.packetNumber == ack.largest) {
        haveRttSample = true;
        sampleSentTime = packet.timeSent;
      }
      fate.OnPacketAcked(packet);
    }
  }
  if (!newlyAcked) return AckResult::Ok;

  if (haveRttSample) {
    UpdateRtt(now > sampleSentTime ? now - sampleSentTime : 0, ack.ackDelayMicroseconds, now);
  }
  m_ptoCount = 0;  // RFC 9002 6.2.1: an acknowledgement resets the backoff

  // RFC 9002 7.8: a window that was not used (in flight stayed under half of it) does not grow.
  const bool windowLimited = 2 * m_inFlightHigh >= m_stats.congestionWindow;
  // RFC 9002 A.7 handles losses before growth: once a congestion event starts a recovery period
  // now, none of these packets (all sent before now) may grow the window.
  const bool reduced = DetectLosses(now, fate);
  // RFC 9406 4.2: this ACK belongs to the round it starts, if it ends one; it grows the window in
  // the phase it arrives in, then its sample may change the phase. A loss just now set ssthresh,
  // which ends HyStart++.
  if (HyStartActive()) HyStartNextRoundIfDue();
  if (!reduced && windowLimited) GrowWindow(growthBytes);
  if (haveRttSample && HyStartActive()) HyStartOnRttSample(m_stats.latestRtt);
  m_inFlightHigh = m_stats.bytesInFlight;

  AdvanceHints();
  TrimFront(now);
  return AckResult::Ok;
}

// ---- RTT (RFC 9002 5.3) ----

void LossRecovery::UpdateRtt(Microseconds latest, Microseconds ackDelay,
                             Microseconds now) noexcept {
  m_stats.latestRtt = latest;
  if (!m_hasRttSample) {
    m_hasRttSample = true;
    m_firstRttSampleTime = now;
    m_stats.minRtt = latest;
    m_stats.smoothedRtt = latest;
    m_stats.rttVariation = latest / 2;
    return;
  }
  m_stats.minRtt = std::min(m_stats.minRtt, latest);
  // The peer's reported delay is trusted only up to what it promised, and never so far that the
  // sample would fall below the minimum RTT.
  const Microseconds delay = std::min(ackDelay, m_peerMaxAckDelay);
  const Microseconds adjusted = latest >= m_stats.minRtt + delay ? latest - delay : latest;
  const Microseconds deviation = m_stats.smoothedRtt > adjusted ? m_stats.smoothedRtt - adjusted
                                                                : adjusted - m_stats.smoothedRtt;
  m_stats.rttVariation = (3 * m_stats.rttVariation + deviation) / 4;
  m_stats.smoothedRtt = (7 * m_stats.smoothedRtt + adjusted) / 8;
}

// ---- Loss detection (RFC 9002 6.1, A.10) ----

Microseconds LossRecovery::LossDelay() const noexcept {
  const Microseconds rtt =
      m_hasRttSample ? std::max(m_stats.smoothedRtt, m_stats.latestRtt) : kInitialRtt;
  return std::max(rtt * 9 / 8, kTimerGranularity);
}

bool LossRecovery::DetectLosses(Microseconds now, IPacketFate& fate) {
  m_lossTime = 0;
  if (!m_anyAcked) return false;
  const Microseconds lossDelay = LossDelay();

  bool anyInFlightLost = false;
  Microseconds largestLostSentTime = 0;
  // The span of newly lost ack-eliciting packets sent after the first RTT sample (RFC 9002 7.6.2).
  bool anyCongestionCandidate = false;
  std::size_t firstCandidate = 0;
  std::size_t lastCandidate = 0;

  for (std::size_t i = LowerBound(m_firstOutstanding); i < m_count; ++i) {
    Record& record = At(i);
    if (record.packet.packetNumber > m_largestAcked) break;
    if (record.state != Record::State::Outstanding) continue;
    const bool lostByTime = record.packet.timeSent + lossDelay <= now;
    const bool lostByCount = m_largestAcked >= record.packet.packetNumber + kPacketThreshold;
    if (!lostByTime && !lostByCount) {
      const Microseconds lossAt = record.packet.timeSent + lossDelay;
      if (m_lossTime == 0 || lossAt < m_lossTime) m_lossTime = lossAt;
      continue;
    }
    record.state = Record::State::Lost;
    record.lostTime = now;
    const SentPacket packet = record.packet;
    ++m_stats.packetsLost;
    m_stats.bytesInFlight -= packet.size;
    anyInFlightLost = true;
    largestLostSentTime = std::max(largestLostSentTime, packet.timeSent);
    --m_ackElicitingInFlight;
    if (m_hasRttSample && packet.timeSent > m_firstRttSampleTime) {
      if (!anyCongestionCandidate) firstCandidate = i;
      anyCongestionCandidate = true;
      lastCandidate = i;
    }
    fate.OnPacketLost(packet);
  }

  if (!anyInFlightLost) return false;
  // RFC 9002 B.8: one reduction per batch, keyed on the most recently sent lost packet.
  bool reduced = OnCongestionEvent(largestLostSentTime, now);
  if (anyCongestionCandidate && InPersistentCongestion(firstCandidate, lastCandidate)) {
    // RFC 9002 7.6.2: collapse to the minimum window and leave the recovery period.
    m_stats.congestionWindow = MinimumWindow();
    m_avoidanceRemainder = 0;
    m_inRecovery = false;
    ++m_stats.persistentCongestion;
    reduced = true;
  }
  return reduced;
}

bool LossRecovery::InPersistentCongestion(std::size_t firstIndex,
                                          std::size_t lastIndex) const noexcept {
  const Microseconds first = At(firstIndex).packet.timeSent;
  const Microseconds last = At(lastIndex).packet.timeSent;
  // RFC 9002 7.6.1: three PTOs without backoff.
  const Microseconds duration = 3 * ProbeTimeout();
  if (last < first || last - first <= duration) return false;
  // RFC 9002 7.6.2: no packet sent between the two was acknowledged.
  for (std::size_t i = firstIndex + 1; i < lastIndex; ++i) {
    if (At(i).state == Record::State::Acked) return false;
  }
  return true;
}

// ---- NewReno (RFC 9002 7, B.5-B.8) ----

std::uint64_t LossRecovery::MinimumWindow() const noexcept {
  return 2 * std::uint64_t{m_options.maxDatagramSize};
}

bool LossRecovery::OnCongestionEvent(Microseconds sentTime, Microseconds now) noexcept {
  if (m_inRecovery && sentTime <= m_recoveryStart) return false;  // same round trip: once only
  m_inRecovery = true;
  m_recoveryStart = now;
  m_ssthresh = std::max(m_stats.congestionWindow / 2, MinimumWindow());
  m_stats.congestionWindow = m_ssthresh;
  m_avoidanceRemainder = 0;
  ++m_stats.congestionEvents;
  return true;
}

void LossRecovery::GrowWindow(std::uint64_t ackedBytes) noexcept {
  if (ackedBytes == 0) return;
  std::uint64_t& cwnd = m_stats.congestionWindow;
  if (cwnd < m_ssthresh) {
    if (HyStartActive()) {
      if (!Paced()) {
        ackedBytes = std::min(ackedBytes, kUnpacedGrowthLimitDatagrams * m_options.maxDatagramSize);
      }
      if (m_conservative) {
        // RFC 9406 4.2: CSS grows by acked / CSS_GROWTH_DIVISOR, carrying what the division drops.
        const std::uint64_t bytes = ackedBytes + m_cssGrowthRemainder;
        cwnd += bytes / kCssGrowthDivisor;
        m_cssGrowthRemainder = bytes % kCssGrowthDivisor;
        return;
      }
    }
    cwnd += ackedBytes;  // slow start
    return;
  }
  // Congestion avoidance: mds * acked / cwnd, carrying the remainder so that small ACKs on a
  // large window still add up to one datagram per window acknowledged.
  const std::uint64_t scaled = m_options.maxDatagramSize * ackedBytes + m_avoidanceRemainder;
  const std::uint64_t divisor = cwnd;
  cwnd += scaled / divisor;
  m_avoidanceRemainder = scaled % divisor;
}

// ---- HyStart++ (RFC 9406) ----

bool LossRecovery::HyStartActive() const noexcept {
  // RFC 9406 4: only the initial slow start; later ones stop at the ssthresh a loss (or CSS)
  // set. Without congestion control the window is only a statistic: it stays plain NewReno.
  return m_options.congestionControl && m_ssthresh == UINT64_MAX;
}

void LossRecovery::HyStartNextRoundIfDue() noexcept {
  // RFC 9406 4.2: the round ends once a packet sent after it started (windowEnd, the next number
  // at its start) is acked; a lost windowEnd is passed by a later acked packet.
  if (m_largestAcked < m_roundEnd) return;
  m_roundEnd = m_nextPacketNumber;
  m_lastRoundMinRtt = m_roundMinRtt;
  m_roundMinRtt = kNoRtt;
  m_roundRttSamples = 0;
  if (m_conservative && ++m_cssRounds >= kCssRounds) {
    // The delay stayed up for CSS_ROUNDS rounds (the partial round CSS began in counts): the
    // increase was real, so enter congestion avoidance at the current window.
    m_conservative = false;
    m_ssthresh = m_stats.congestionWindow;
    m_avoidanceRemainder = 0;
  }
}

void LossRecovery::HyStartOnRttSample(Microseconds rtt) noexcept {
  m_roundMinRtt = std::min(m_roundMinRtt, rtt);
  if (m_roundRttSamples < kNRttSample) ++m_roundRttSamples;
  // RFC 9406 4.2: decide only on N_RTT_SAMPLE samples. The minimum only falls within a round, so
  // an exit can only happen on the Nth sample; a return from CSS on any later one.
  if (m_roundRttSamples < kNRttSample) return;
  if (!m_conservative) {
    if (m_lastRoundMinRtt == kNoRtt) return;
    const Microseconds threshold =
        std::clamp(m_lastRoundMinRtt / kMinRttDivisor, kMinRttThresh, kMaxRttThresh);
    if (m_roundMinRtt >= m_lastRoundMinRtt + threshold) {
      // The queue at the bottleneck is growing: slow down before it overflows.
      m_conservative = true;
      m_cssBaselineMinRtt = m_roundMinRtt;
      m_cssRounds = 0;
      m_cssGrowthRemainder = 0;
      ++m_stats.slowStartExitsOnDelay;
    }
  } else if (m_roundMinRtt < m_cssBaselineMinRtt) {
    // The delay that ended slow start went away (jitter, not a queue): resume slow start.
    m_conservative = false;
    m_cssBaselineMinRtt = kNoRtt;
  }
}

// ---- Timer (RFC 9002 6.2, A.8, A.9) ----

Microseconds LossRecovery::ProbeTimeout() const noexcept {
  if (!m_hasRttSample) return kInitialPto;
  return m_stats.smoothedRtt + std::max(4 * m_stats.rttVariation, kTimerGranularity) +
         m_peerMaxAckDelay;
}

Microseconds LossRecovery::PtoDeadline() const noexcept {
  const unsigned shift = std::min(m_ptoCount, kMaxPtoBackoff);
  return m_lastAckElicitingSent + (ProbeTimeout() << shift);
}

std::optional<Microseconds> LossRecovery::LossDetectionDeadline() const noexcept {
  if (m_lossTime != 0) return m_lossTime;
  if (m_ackElicitingInFlight == 0) return std::nullopt;
  return PtoDeadline();
}

unsigned LossRecovery::OnLossDetectionTimeout(Microseconds now, IPacketFate& fate) {
  if (m_lossTime != 0) {
    if (now < m_lossTime) return 0;  // early: the caller re-arms from LossDetectionDeadline()
    RefillPacer(now);
    DetectLosses(now, fate);
    AdvanceHints();
    TrimFront(now);
    return 0;
  }
  if (m_ackElicitingInFlight == 0 || now < PtoDeadline()) return 0;
  ++m_stats.probeTimeouts;
  if (m_ptoCount < std::numeric_limits<unsigned>::max()) ++m_ptoCount;
  // RFC 9002 6.2.4: one probe, then two so that a single loss does not cause another PTO.
  return m_ptoCount > 1 ? 2 : 1;
}

bool LossRecovery::HasAckElicitingInFlight() const noexcept { return m_ackElicitingInFlight > 0; }

const LossRecoveryStatistics& LossRecovery::Statistics() const noexcept { return m_stats; }

void LossRecovery::DiscardAll() noexcept {
  m_head = 0;
  m_count = 0;
  m_firstOutstanding = m_nextPacketNumber;
  m_firstUnacked = m_nextPacketNumber;
  m_stats.bytesInFlight = 0;
  m_ackElicitingInFlight = 0;
  m_lossTime = 0;
  m_ptoCount = 0;
  m_inFlightHigh = 0;
}

// ---- Pacing (RFC 9002 7.7) ----

bool LossRecovery::Paced() const noexcept {
  return m_options.congestionControl && m_options.pacing;
}

double LossRecovery::PacingCapacity() const noexcept {
  const Microseconds rtt = PacingRtt(m_hasRttSample, m_stats.smoothedRtt);
  const double burst = kPacingGain * static_cast<double>(m_stats.congestionWindow) *
                       kPacingBurstMicroseconds / static_cast<double>(rtt);
  return std::max(static_cast<double>(kPacingBurstPackets * m_options.maxDatagramSize), burst);
}

double LossRecovery::PacingTokensAt(Microseconds now) const noexcept {
  const double capacity = PacingCapacity();
  if (now <= m_pacingUpdated) return std::min(m_pacingTokens, capacity);
  const Microseconds rtt = PacingRtt(m_hasRttSample, m_stats.smoothedRtt);
  // Multiply before dividing so that whole-byte results come out exact.
  const double earned = kPacingGain * static_cast<double>(m_stats.congestionWindow) *
                        static_cast<double>(now - m_pacingUpdated) / static_cast<double>(rtt);
  return std::min(m_pacingTokens + earned, capacity);
}

void LossRecovery::RefillPacer(Microseconds now) noexcept {
  m_pacingTokens = PacingTokensAt(now);
  m_pacingUpdated = std::max(m_pacingUpdated, now);
}

Microseconds LossRecovery::NextSendTime(Microseconds now) const noexcept {
  if (!Paced()) return now;
  const double tokens = PacingTokensAt(now);
  const double needed = static_cast<double>(m_options.maxDatagramSize);
  if (tokens + kPacingEpsilon >= needed) return now;
  const Microseconds rtt = PacingRtt(m_hasRttSample, m_stats.smoothedRtt);
  const double wait = (needed - tokens) * static_cast<double>(rtt) /
                      (kPacingGain * static_cast<double>(m_stats.congestionWindow));
  return now +
         std::max<Microseconds>(1, static_cast<Microseconds>(std::ceil(wait - kPacingEpsilon)));
}

}  // namespace timerwheel::rudp::detail
