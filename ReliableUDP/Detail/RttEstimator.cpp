// RttEstimator: RFC 9002 5.3 and the timeouts of 6.1.2 and 6.2.1.
#include "ReliableUDP/Detail/RttEstimator.h"

#include <algorithm>

namespace timerwheel::rudp::detail {

void RttEstimator::OnSample(Microseconds latest, Microseconds ackDelay, Microseconds now) noexcept {
  m_latest = latest;
  if (!m_hasSample) {
    m_hasSample = true;
    m_firstSampleTime = now;
    m_min = latest;
    m_smoothed = latest;
    m_variation = latest / 2;
    return;
  }
  m_min = std::min(m_min, latest);
  // The peer's reported delay is trusted only up to what it promised, and never so far that the
  // sample would fall below the minimum RTT.
  const Microseconds delay = TrustedAckDelay(ackDelay);
  const Microseconds adjusted = latest >= m_min + delay ? latest - delay : latest;
  const Microseconds deviation =
      m_smoothed > adjusted ? m_smoothed - adjusted : adjusted - m_smoothed;
  m_variation = (3 * m_variation + deviation) / 4;
  m_smoothed = (7 * m_smoothed + adjusted) / 8;
}

Microseconds RttEstimator::LossDelay() const noexcept {
  const Microseconds rtt = m_hasSample ? std::max(m_smoothed, m_latest) : kInitialRtt;
  return std::max(rtt * 9 / 8, kTimerGranularity);
}

Microseconds RttEstimator::ProbeTimeout() const noexcept {
  if (!m_hasSample) return kInitialPto;
  return m_smoothed + std::max(4 * m_variation, kTimerGranularity) + m_peerMaxAckDelay;
}

Microseconds RttEstimator::PacingRtt() const noexcept {
  return m_hasSample ? std::max<Microseconds>(m_smoothed, 1) : kInitialRtt;
}

}  // namespace timerwheel::rudp::detail
