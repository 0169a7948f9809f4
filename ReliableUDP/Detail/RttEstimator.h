// A connection's round-trip time estimate, and the timeouts derived from it (RFC 9002 5, 6).
#pragma once

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// RFC 9002 5.3: the first sample sets smoothed = sample, variation = sample / 2; later ones
// move them with gains 1/8 and 1/4 (RFC 6298), after subtracting the peer's ACK delay (capped at
// the max ACK delay it advertised) unless that would take the sample below the minimum RTT.
// Not thread-safe; O(1), no allocation.
class RttEstimator {
 public:
  // Once the handshake has told us the peer's max ACK delay (before: 0).
  void SetPeerMaxAckDelay(Microseconds maxAckDelay) noexcept { m_peerMaxAckDelay = maxAckDelay; }
  Microseconds PeerMaxAckDelay() const noexcept { return m_peerMaxAckDelay; }
  // How much of a reported ACK delay is believed: at most the max ACK delay the peer advertised,
  // for the RTT estimate and the congestion controller's queue signal alike. RFC 9002 5.3 caps it
  // once the handshake is confirmed (and ignores max_ack_delay before, when QUIC's handshake ACKs
  // may wait for keys): here no ACK is processed before the connection is established, when the
  // handshake is over and the peer's max ACK delay is set (before, the cap is 0: none believed).
  Microseconds TrustedAckDelay(Microseconds ackDelay) const noexcept {
    return ackDelay < m_peerMaxAckDelay ? ackDelay : m_peerMaxAckDelay;
  }

  // A sample: `latest` from a newly acknowledged largest packet, `ackDelay` as the peer reported.
  void OnSample(Microseconds latest, Microseconds ackDelay, Microseconds now) noexcept;

  bool HasSample() const noexcept { return m_hasSample; }
  Microseconds FirstSampleTime() const noexcept { return m_firstSampleTime; }
  // Microseconds; 0 until the first sample.
  Microseconds Smoothed() const noexcept { return m_smoothed; }
  Microseconds Variation() const noexcept { return m_variation; }
  Microseconds Min() const noexcept { return m_min; }
  Microseconds Latest() const noexcept { return m_latest; }

  // RFC 9002 6.1.2: how long after a packet was sent it is lost once a later one is acked:
  // max(9/8 * max(smoothed, latest), kTimerGranularity) (kInitialRtt before a sample).
  Microseconds LossDelay() const noexcept;
  // RFC 9002 6.2.1, without backoff: smoothed + max(4 * variation, kTimerGranularity) + the
  // peer's max ACK delay; kInitialPto before a sample.
  Microseconds ProbeTimeout() const noexcept;
  // The round trip a window is spread over when pacing (RFC 9002 7.7): smoothed, never 0
  // (loopback samples can be), kInitialRtt before a sample.
  Microseconds PacingRtt() const noexcept;

 private:
  bool m_hasSample = false;
  Microseconds m_firstSampleTime = 0;
  Microseconds m_smoothed = 0;
  Microseconds m_variation = 0;
  Microseconds m_min = 0;
  Microseconds m_latest = 0;
  Microseconds m_peerMaxAckDelay = 0;
};

}  // namespace timerwheel::rudp::detail
