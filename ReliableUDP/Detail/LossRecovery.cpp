// LossRecovery: RFC 9002 loss detection and probe timeouts over the sent-packet log, the RTT
// estimator, the congestion controller and the pacer.
#include "ReliableUDP/Detail/LossRecovery.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <stdexcept>

#include "ReliableUDP/Detail/Bbr.h"
#include "ReliableUDP/Detail/KnownPathController.h"
#include "ReliableUDP/Detail/NewReno.h"

namespace timerwheel::rudp::detail {
namespace {

// Lost records are kept this many PTOs (without backoff): long enough for a late ACK, reordered
// or delayed, to reveal that a loss was spurious (Statistics().spuriousLosses).
constexpr Microseconds kLostRecordKeepPtos = 3;

// The pacer a connection starts with, and starts again with when the negotiated datagram size
// is known: NewReno's initial window as its burst.
Pacer InitialPacer(std::size_t maxDatagramSize, Microseconds pacingRtt) {
  return Pacer(maxDatagramSize, NewReno::InitialWindow(maxDatagramSize), pacingRtt);
}

std::unique_ptr<ICongestionController> NewController(const LossRecoveryOptions& options) {
  if (!options.congestionControl) {
    return std::make_unique<KnownPathController>(options.maxDatagramSize);
  }
  if (options.modelBased) {
    return std::make_unique<Bbr>(options.maxDatagramSize, options.controllerSeed);
  }
  return std::make_unique<NewReno>(
      NewRenoOptions{options.maxDatagramSize, /*hyStart*/ true, /*paced*/ options.pacing});
}

}  // namespace

// Every controller starts with NewReno's initial window (Bbr and the known path's shadow too).
LossRecovery::LossRecovery(const LossRecoveryOptions& options)
    : m_maxDatagramSize(static_cast<std::uint32_t>(options.maxDatagramSize)),
      m_congestionControl(options.congestionControl),
      m_pacing(options.pacing),
      m_modelBased(options.modelBased),
      m_pacer(InitialPacer(options.maxDatagramSize, m_rtt.PacingRtt())),
      m_controllerSeed(options.controllerSeed) {
  assert(options.maxDatagramSize > 0 &&
         options.maxDatagramSize <= std::numeric_limits<std::uint32_t>::max());
}

LossRecovery::~LossRecovery() = default;

LossRecoveryOptions LossRecovery::Options() const noexcept {
  return LossRecoveryOptions{m_maxDatagramSize, m_congestionControl, m_pacing, m_modelBased,
                             m_controllerSeed};
}

std::uint64_t LossRecovery::Window() const noexcept {
  return m_congestion ? m_congestion->Window() : NewReno::InitialWindow(m_maxDatagramSize);
}

bool LossRecovery::LimitsSending() const noexcept {
  return m_congestion ? m_congestion->LimitsSending() : m_congestionControl;
}

double LossRecovery::PacingRate() const noexcept {
  if (m_congestion) return m_congestion->PacingRate();
  return m_congestionControl && m_modelBased ? Bbr::InitialPacingRate(m_maxDatagramSize) : 0.0;
}

const CongestionStatistics& LossRecovery::CongestionControllerStatistics() const noexcept {
  static const CongestionStatistics kNone{};
  return m_congestion ? m_congestion->Statistics() : kNone;
}

void LossRecovery::SetPeerMaxAckDelay(Microseconds maxAckDelay) noexcept {
  m_rtt.SetPeerMaxAckDelay(maxAckDelay);
}

void LossRecovery::SetMaxDatagramSize(std::size_t maxDatagramSize) {
  if (maxDatagramSize == 0 || maxDatagramSize > std::numeric_limits<std::uint32_t>::max()) {
    throw std::invalid_argument("LossRecovery::SetMaxDatagramSize: size out of range");
  }
  // A controller sized its window, and what is in flight was counted, in the old size: changing
  // it under them would leave a window and a minimum that disagree with the packets.
  if (m_congestion || m_ackElicitingInFlight > 0) {
    throw std::logic_error(
        "LossRecovery::SetMaxDatagramSize: only before the controller and with nothing in flight");
  }
  m_maxDatagramSize = static_cast<std::uint32_t>(maxDatagramSize);
  m_pacer = InitialPacer(maxDatagramSize, m_rtt.PacingRtt());
}

// ---- Sending ----

void LossRecovery::PrepareToSend(bool mayCarryMoreThanPing) {
  if (mayCarryMoreThanPing && !m_congestion) StartController();
  m_log.MakeRoomForOne();
}

void LossRecovery::StartController() {
  // The first packet that carries more than a PING: the controller starts here, told what it
  // would have been told of the application's limit so far (with what is in flight now: only
  // PINGs can be, usually nothing).
  m_congestion = NewController(Options());
  if (m_appLimitedBeforeController) {
    m_congestion->OnApplicationLimited(m_bytesInFlight);
    m_appLimitedBeforeController = false;
  }
}

void LossRecovery::OnPacketSent(const SentPacket& packet) {
  assert(packet.packetNumber >= m_nextPacketNumber);
  if (!packet.ackEliciting) {
    // RFC 9002 leaves ACK-only packets out of loss detection. Not recording them also bounds
    // the log against a peer that sends PINGs but never acknowledges anything.
    m_nextPacketNumber = packet.packetNumber + 1;
    return;
  }
  // From here on every packet is ack-eliciting, and so in flight (this transport sends no
  // padding-only packets): every record in the log counts toward bytes in flight.
  RefillPacer(packet.timeSent);
  m_pacer.OnPacketSent(packet.size);
  if (!m_congestion && !packet.pingOnly) StartController();  // PrepareToSend made it, if asked
  m_log.Push(packet);
  m_nextPacketNumber = packet.packetNumber + 1;
  m_bytesInFlight += packet.size;
  if (m_congestion) {
    SentPacket& logged = m_log.At(m_log.Count() - 1).packet;
    logged.controllerSaw = true;
    m_congestion->OnPacketSent(logged, m_bytesInFlight);
  }
  ++m_ackElicitingInFlight;
  if (packet.pingOnly) ++m_pingOnlyInFlight;
  m_lastAckElicitingSent = packet.timeSent;
}

void LossRecovery::OnApplicationLimited() noexcept {
  if (m_congestion) {
    m_congestion->OnApplicationLimited(m_bytesInFlight);
  } else {
    m_appLimitedBeforeController = true;
  }
}

bool LossRecovery::CanSend(std::size_t bytes) const noexcept {
  if (!LimitsSending()) return true;
  return m_bytesInFlight + bytes <= Window();
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
  // not yet Acked count, and none below FirstUnacked() exist. The walk jumps over runs of Acked
  // records (NextNotAcked), so a frame costs O(ranges x log(records) + newly acknowledged)
  // however many records are held and however often the peer repeats itself.
  bool newlyAcked = false;
  bool haveRttSample = false;
  Microseconds sampleSentTime = 0;
  for (std::size_t k = 0; k < rangeCount; ++k) {
    const AckRange& range = ack.ranges[k];
    if (range.smallest > range.largest || range.largest < m_log.FirstUnacked()) continue;
    const PacketNumber from = std::max(range.smallest, m_log.FirstUnacked());
    for (std::size_t i = m_log.NextNotAcked(m_log.LowerBound(from)); i < m_log.Count();
         i = m_log.NextNotAcked(i + 1)) {
      SentPacketLog::Record& record = m_log.At(i);
      if (record.packet.packetNumber > range.largest) break;
      const bool wasLost = record.state == SentPacketLog::State::Lost;
      m_log.MarkAcked(i);
      const SentPacket packet = record.packet;
      newlyAcked = true;
      ++m_packetsAcked;
      if (wasLost) {
        // Already taken out of flight when declared lost.
        ++m_spuriousLosses;
      } else {
        m_bytesInFlight -= packet.size;
        --m_ackElicitingInFlight;
        if (packet.pingOnly) --m_pingOnlyInFlight;
        if (packet.controllerSaw) m_congestion->OnPacketAcked(packet, now);
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
    m_rtt.OnSample(now > sampleSentTime ? now - sampleSentTime : 0, ack.ackDelayMicroseconds, now);
  }
  m_ptoCount = 0;  // RFC 9002 6.2.1: an acknowledgement resets the backoff

  // RFC 9002 A.7 handles losses before growth: once a congestion event starts a recovery period
  // now, none of these packets (all sent before now) may grow the window.
  const bool windowReduced = DetectLosses(now, fate);
  if (!m_congestion) {
    Settle(now);
    return AckResult::Ok;
  }
  AckEvent event;
  event.windowReduced = windowReduced;
  event.now = now;
  event.largestAcked = m_largestAcked;
  event.nextPacketNumber = m_nextPacketNumber;
  event.bytesInFlight = m_bytesInFlight;
  event.hasRttSample = haveRttSample;
  event.latestRtt = m_rtt.Latest();
  // Capped at the peer's max_ack_delay, as the RTT estimate is (RFC 9002 5.3): Bbr subtracts it
  // from the RTT to see a queue, and an uncapped one (a varint, up to 2^62 us) from a peer that
  // reports huge delays would hide every queue, and with it congestive loss.
  event.ackDelay = m_rtt.TrustedAckDelay(ack.ackDelayMicroseconds);
  m_congestion->OnAckProcessed(event);

  Settle(now);
  return AckResult::Ok;
}

// ---- Loss detection (RFC 9002 6.1, A.10) ----

bool LossRecovery::DetectLosses(Microseconds now, IPacketFate& fate) {
  m_lossTime = 0;
  if (!m_anyAcked) return false;
  const Microseconds lossDelay = m_rtt.LossDelay();

  bool anyLost = false;
  Microseconds largestLostSentTime = 0;
  std::uint64_t lostBytes = 0;
  // The span of newly lost ack-eliciting packets sent after the first RTT sample (RFC 9002 7.6.2).
  bool anyCongestionCandidate = false;
  std::size_t firstCandidate = 0;
  std::size_t lastCandidate = 0;

  // From the first Outstanding record to the largest acknowledged: every Outstanding record more
  // than kPacketThreshold below the largest is declared lost here, so what this passes over is
  // what this ACK acknowledged or declares lost, plus at most kPacketThreshold records.
  for (std::size_t i = m_log.LowerBound(m_log.FirstOutstanding()); i < m_log.Count(); ++i) {
    m_log.NoteVisits(1);
    SentPacketLog::Record& record = m_log.At(i);
    if (record.packet.packetNumber > m_largestAcked) break;
    if (record.state != SentPacketLog::State::Outstanding) continue;
    const bool lostByTime = record.packet.timeSent + lossDelay <= now;
    const bool lostByCount = m_largestAcked >= record.packet.packetNumber + kPacketThreshold;
    if (!lostByTime && !lostByCount) {
      const Microseconds lossAt = record.packet.timeSent + lossDelay;
      if (m_lossTime == 0 || lossAt < m_lossTime) m_lossTime = lossAt;
      continue;
    }
    record.state = SentPacketLog::State::Lost;
    record.lostTime = now;
    const SentPacket packet = record.packet;
    ++m_packetsLost;
    m_bytesInFlight -= packet.size;
    --m_ackElicitingInFlight;
    if (packet.pingOnly) --m_pingOnlyInFlight;
    fate.OnPacketLost(packet);
    // What the controller never saw sent (PINGs before it existed) is no news to it.
    if (!packet.controllerSaw) continue;
    anyLost = true;
    lostBytes += packet.size;
    largestLostSentTime = std::max(largestLostSentTime, packet.timeSent);
    if (m_rtt.HasSample() && packet.timeSent > m_rtt.FirstSampleTime()) {
      if (!anyCongestionCandidate) firstCandidate = i;
      anyCongestionCandidate = true;
      lastCandidate = i;
    }
  }

  if (!anyLost) return false;
  bool reduced = m_congestion->OnPacketsLost(largestLostSentTime, lostBytes, now);
  if (anyCongestionCandidate && InPersistentCongestion(firstCandidate, lastCandidate)) {
    m_congestion->OnPersistentCongestion();
    reduced = true;
  }
  return reduced;
}

bool LossRecovery::InPersistentCongestion(std::size_t firstIndex,
                                          std::size_t lastIndex) const noexcept {
  const Microseconds first = m_log.At(firstIndex).packet.timeSent;
  const Microseconds last = m_log.At(lastIndex).packet.timeSent;
  // RFC 9002 7.6.1: three PTOs without backoff.
  const Microseconds duration = 3 * ProbeTimeout();
  if (last < first || last - first <= duration) return false;
  // RFC 9002 7.6.2: no packet sent between the two was acknowledged.
  for (std::size_t i = firstIndex + 1; i < lastIndex; ++i) {
    if (m_log.At(i).state == SentPacketLog::State::Acked) return false;
  }
  return true;
}

void LossRecovery::Settle(Microseconds now) noexcept {
  m_log.AdvanceHints(m_nextPacketNumber);
  m_log.TrimFront(now, kLostRecordKeepPtos * ProbeTimeout());
}

// ---- Timer (RFC 9002 6.2, A.8, A.9) ----

Microseconds LossRecovery::PtoDeadline() const noexcept {
  const unsigned shift = std::min<unsigned>(m_ptoCount, kMaxPtoBackoff);
  Microseconds timeout = ProbeTimeout() << shift;
  if (m_pingOnlyInFlight == m_ackElicitingInFlight) timeout = std::max(timeout, m_pingProbeFloor);
  return m_lastAckElicitingSent + timeout;
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
    Settle(now);
    return 0;
  }
  if (m_ackElicitingInFlight == 0 || now < PtoDeadline()) return 0;
  ++m_probeTimeouts;
  if (m_ptoCount < std::numeric_limits<std::uint16_t>::max()) ++m_ptoCount;
  // RFC 9002 6.2.4: one probe, then two so that a single loss does not cause another PTO.
  return m_ptoCount > 1 ? 2 : 1;
}

LossRecoveryStatistics LossRecovery::Statistics() const noexcept {
  LossRecoveryStatistics stats;
  stats.smoothedRtt = m_rtt.Smoothed();
  stats.rttVariation = m_rtt.Variation();
  stats.minRtt = m_rtt.Min();
  stats.latestRtt = m_rtt.Latest();
  stats.congestionWindow = Window();
  stats.bytesInFlight = m_bytesInFlight;
  stats.packetsAcked = m_packetsAcked;
  stats.packetsLost = m_packetsLost;
  stats.spuriousLosses = m_spuriousLosses;
  stats.probeTimeouts = m_probeTimeouts;
  const CongestionStatistics& congestion = CongestionControllerStatistics();
  stats.congestionEvents = congestion.congestionEvents;
  stats.persistentCongestion = congestion.persistentCongestion;
  stats.slowStartExitsOnDelay = congestion.slowStartExitsOnDelay;
  return stats;
}

void LossRecovery::DiscardAll() noexcept {
  m_log.Clear(m_nextPacketNumber);
  m_bytesInFlight = 0;
  m_ackElicitingInFlight = 0;
  m_pingOnlyInFlight = 0;
  m_lossTime = 0;
  m_ptoCount = 0;
  if (m_congestion) m_congestion->OnInFlightDiscarded();
}

// ---- Pacing (RFC 9002 7.7) ----

bool LossRecovery::Paced() const noexcept {
  // A model-based controller is rate-based: it always paces.
  return (m_pacing || m_modelBased) && LimitsSending();
}

void LossRecovery::RefillPacer(Microseconds now) noexcept {
  const double rate = PacingRate();
  if (rate > 0) {
    m_pacer.RefillAtRate(now, rate);
  } else {
    m_pacer.Refill(now, Window(), m_rtt.PacingRtt());
  }
}

Microseconds LossRecovery::NextSendTime(Microseconds now) const noexcept {
  if (!Paced()) return now;
  const double rate = PacingRate();
  if (rate > 0) return m_pacer.NextSendTimeAtRate(now, rate);
  return m_pacer.NextSendTime(now, Window(), m_rtt.PacingRtt());
}

}  // namespace timerwheel::rudp::detail
