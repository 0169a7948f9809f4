// Delivery-rate samples for a model-based congestion controller (draft-ietf-ccwg-bbr 4.5.2.3).
#pragma once

#include <cstdint>

#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SentPacketLog.h"

namespace timerwheel::rudp::detail {

// What one ACK says about the rate the path delivered at.
struct RateSample {
  std::uint64_t delivered = 0;       // bytes delivered over `interval`
  Microseconds interval = 0;         // max(send elapsed, ACK elapsed); 0: no valid sample
  std::uint64_t priorDelivered = 0;  // the connection's delivered count when the packet was sent
  bool appLimited = false;           // the newest acked packet was sent while app-limited
  // Bytes per second, or 0 when the sample is invalid (no packet acked, or too short).
  double Rate() const noexcept {
    return interval == 0 ? 0.0
                         : static_cast<double>(delivered) * 1e6 / static_cast<double>(interval);
  }
};

// Each packet carries the connection's delivered count and time when sent; when it is acked, the
// bytes delivered since, over the longer of the time it took to send them and the time it took to
// acknowledge them, is the rate the path delivered at (the longer one, because ACK compression or
// a burst of sends makes the shorter one overstate it). A packet sent while the application had
// nothing more to send is marked app-limited: its sample shows the application's rate, not the
// path's, and a controller only uses it if it is above its estimate.
//
// Use: OnPacketSent stamps each packet as it leaves; per ACK, OnPacketAcked for each newly
// acknowledged packet, then TakeSample. Not thread-safe; O(1), no allocation.
class DeliveryRateSampler {
 public:
  // `bytesInFlight` includes the packet.
  void OnPacketSent(SentPacket& packet, std::uint64_t bytesInFlight, Microseconds now) noexcept;
  void OnPacketAcked(const SentPacket& packet, Microseconds now) noexcept;
  // The application has nothing to send (or the peer's flow-control window is full) with
  // `bytesInFlight` in flight: what is in flight is app-limited until it is delivered.
  void OnApplicationLimited(std::uint64_t bytesInFlight) noexcept;
  // The sample of the ACK whose packets were passed to OnPacketAcked, valid if longer than
  // `minRtt` (a shorter interval means a burst of ACKs: the rate would be overstated); resets.
  RateSample TakeSample(Microseconds minRtt) noexcept;
  // Everything in flight was forgotten.
  void OnInFlightDiscarded() noexcept;

  std::uint64_t Delivered() const noexcept { return m_delivered; }
  bool AppLimited() const noexcept { return m_appLimitedUntil != 0; }

 private:
  std::uint64_t m_delivered = 0;
  Microseconds m_deliveredTime = 0;
  Microseconds m_firstSentTime = 0;
  // App-limited until `m_delivered` passes this (0: not app-limited). At least 1 when set.
  std::uint64_t m_appLimitedUntil = 0;
  // The sample being built from this ACK's packets (the newest packet wins).
  bool m_haveSample = false;
  RateSample m_sample;
  Microseconds m_sendElapsed = 0;
  Microseconds m_ackElapsed = 0;
};

}  // namespace timerwheel::rudp::detail
