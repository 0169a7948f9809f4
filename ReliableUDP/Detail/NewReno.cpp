// NewReno with HyStart++ (see NewReno.h).
#include "ReliableUDP/Detail/NewReno.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <utility>

namespace timerwheel::rudp::detail {
namespace {

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

}  // namespace

std::uint64_t NewReno::InitialWindow(std::size_t maxDatagramSize) noexcept {
  // RFC 9002 7.2.
  return std::min<std::uint64_t>(
      10 * std::uint64_t{maxDatagramSize},
      std::max<std::uint64_t>(14720, 2 * std::uint64_t{maxDatagramSize}));
}

NewReno::NewReno(const NewRenoOptions& options)
    : m_options(options), m_window(InitialWindow(options.maxDatagramSize)) {
  assert(options.maxDatagramSize > 0);
}

std::uint64_t NewReno::MinimumWindow() const noexcept {
  return 2 * std::uint64_t{m_options.maxDatagramSize};
}

void NewReno::OnPacketSent(SentPacket& /*packet*/, std::uint64_t bytesInFlight) noexcept {
  m_inFlightHigh = std::max(m_inFlightHigh, bytesInFlight);
}

void NewReno::OnPacketAcked(const SentPacket& packet, Microseconds /*now*/) noexcept {
  // RFC 9002 7.3.2: no growth for packets sent before the current recovery period. Decided
  // before this ACK's losses can start a new one (A.7 detects losses before growing).
  if (!m_inRecovery || packet.timeSent > m_recoveryStart) m_growthBytes += packet.size;
}

bool NewReno::OnPacketsLost(Microseconds largestLostSentTime, std::uint64_t /*lostBytes*/,
                            Microseconds now) noexcept {
  // RFC 9002 B.8: one reduction per batch, keyed on the most recently sent lost packet.
  if (m_inRecovery && largestLostSentTime <= m_recoveryStart) return false;  // same round trip
  m_inRecovery = true;
  m_recoveryStart = now;
  m_ssthresh = std::max(m_window / 2, MinimumWindow());
  m_window = m_ssthresh;
  m_avoidanceRemainder = 0;
  ++m_stats.congestionEvents;
  return true;
}

void NewReno::OnPersistentCongestion() noexcept {
  // RFC 9002 7.6.2: collapse to the minimum window and leave the recovery period.
  m_window = MinimumWindow();
  m_avoidanceRemainder = 0;
  m_inRecovery = false;
  ++m_stats.persistentCongestion;
}

void NewReno::OnAckProcessed(const AckEvent& ack) noexcept {
  const std::uint64_t growthBytes = std::exchange(m_growthBytes, 0);
  // RFC 9002 7.8: a window that was not used (in flight stayed under half of it) does not grow.
  // (Unless this ACK reduced it, the window is still the one the packets were sent under.)
  const bool windowLimited = 2 * m_inFlightHigh >= m_window;
  // RFC 9406 4.2: this ACK belongs to the round it starts, if it ends one; it grows the window in
  // the phase it arrives in, then its sample may change the phase. A loss just now set ssthresh,
  // which ends HyStart++.
  if (HyStartActive()) HyStartNextRoundIfDue(ack.largestAcked, ack.nextPacketNumber);
  if (!ack.windowReduced && windowLimited) Grow(growthBytes);
  if (ack.hasRttSample && HyStartActive()) HyStartOnRttSample(ack.latestRtt);
  m_inFlightHigh = ack.bytesInFlight;
}

void NewReno::OnInFlightDiscarded() noexcept {
  m_inFlightHigh = 0;
  m_growthBytes = 0;
}

void NewReno::Grow(std::uint64_t ackedBytes) noexcept {
  if (ackedBytes == 0) return;
  if (m_window < m_ssthresh) {
    if (HyStartActive()) {
      if (!m_options.paced) {
        ackedBytes = std::min(ackedBytes, kUnpacedGrowthLimitDatagrams * m_options.maxDatagramSize);
      }
      if (m_conservative) {
        // RFC 9406 4.2: CSS grows by acked / CSS_GROWTH_DIVISOR, carrying what the division drops.
        const std::uint64_t bytes = ackedBytes + m_cssGrowthRemainder;
        m_window += bytes / kCssGrowthDivisor;
        m_cssGrowthRemainder = bytes % kCssGrowthDivisor;
        return;
      }
    }
    m_window += ackedBytes;  // slow start
    return;
  }
  // Congestion avoidance: mds * acked / cwnd, carrying the remainder so that small ACKs on a
  // large window still add up to one datagram per window acknowledged.
  const std::uint64_t scaled = m_options.maxDatagramSize * ackedBytes + m_avoidanceRemainder;
  const std::uint64_t divisor = m_window;
  m_window += scaled / divisor;
  m_avoidanceRemainder = scaled % divisor;
}

bool NewReno::HyStartActive() const noexcept {
  // RFC 9406 4: only the initial slow start; later ones stop at the ssthresh a loss (or CSS) set.
  return m_options.hyStart && m_ssthresh == UINT64_MAX;
}

void NewReno::HyStartNextRoundIfDue(PacketNumber largestAcked,
                                    PacketNumber nextPacketNumber) noexcept {
  // RFC 9406 4.2: the round ends once a packet sent after it started (windowEnd, the next number
  // at its start) is acked; a lost windowEnd is passed by a later acked packet.
  if (largestAcked < m_roundEnd) return;
  m_roundEnd = nextPacketNumber;
  m_lastRoundMinRtt = m_roundMinRtt;
  m_roundMinRtt = kNoRtt;
  m_roundRttSamples = 0;
  if (m_conservative && ++m_cssRounds >= kCssRounds) {
    // The delay stayed up for CSS_ROUNDS rounds (the partial round CSS began in counts): the
    // increase was real, so enter congestion avoidance at the current window.
    m_conservative = false;
    m_ssthresh = m_window;
    m_avoidanceRemainder = 0;
  }
}

void NewReno::HyStartOnRttSample(Microseconds rtt) noexcept {
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

}  // namespace timerwheel::rudp::detail
