// DeliveryRateSampler: the draft's per-packet delivery-rate estimation (see DeliveryRateSampler.h).
#include "ReliableUDP/Detail/DeliveryRateSampler.h"

#include <algorithm>

namespace timerwheel::rudp::detail {

void DeliveryRateSampler::OnPacketSent(SentPacket& packet, std::uint64_t bytesInFlight,
                                       Microseconds now) noexcept {
  // After an idle period the first packet restarts both clocks, so the idle time is not counted
  // as time spent delivering.
  if (bytesInFlight <= packet.size) {
    m_firstSentTime = now;
    m_deliveredTime = now;
  }
  packet.delivered = m_delivered;
  packet.deliveredTime = m_deliveredTime;
  packet.firstSentTime = m_firstSentTime;
  packet.appLimited = m_appLimitedUntil != 0;
}

void DeliveryRateSampler::OnPacketAcked(const SentPacket& packet, Microseconds now) noexcept {
  m_delivered += packet.size;
  m_deliveredTime = now;
  // The most recently sent packet of the ACK (the largest delivered count at send) gives the
  // sample: it covers the longest stretch of delivery.
  if (!m_haveSample || packet.delivered >= m_sample.priorDelivered) {
    m_haveSample = true;
    m_sample.priorDelivered = packet.delivered;
    m_sample.appLimited = packet.appLimited;
    m_sendElapsed =
        packet.timeSent >= packet.firstSentTime ? packet.timeSent - packet.firstSentTime : 0;
    m_ackElapsed = now >= packet.deliveredTime ? now - packet.deliveredTime : 0;
    m_firstSentTime = packet.timeSent;
  }
}

void DeliveryRateSampler::OnApplicationLimited(std::uint64_t bytesInFlight) noexcept {
  m_appLimitedUntil = std::max<std::uint64_t>(m_delivered + bytesInFlight, 1);
}

RateSample DeliveryRateSampler::TakeSample(Microseconds minRtt) noexcept {
  // The app-limited stretch ends once everything sent during it has been delivered.
  if (m_appLimitedUntil != 0 && m_delivered > m_appLimitedUntil) m_appLimitedUntil = 0;
  RateSample sample;
  if (!m_haveSample) return sample;
  m_haveSample = false;
  sample = m_sample;
  sample.delivered = m_delivered - m_sample.priorDelivered;
  const Microseconds interval = std::max(m_sendElapsed, m_ackElapsed);
  // An interval shorter than the minimum RTT cannot be a real delivery time: ACKs arrived in a
  // burst. No sample (draft 4.5.2.3: "rs.interval < MinRTT").
  sample.interval = interval >= std::max<Microseconds>(minRtt, 1) ? interval : 0;
  return sample;
}

void DeliveryRateSampler::OnInFlightDiscarded() noexcept {
  m_haveSample = false;
  m_appLimitedUntil = 0;
}

}  // namespace timerwheel::rudp::detail
