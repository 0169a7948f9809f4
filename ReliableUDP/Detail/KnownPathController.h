// The "known path" profile: no congestion window limits sending (CongestionControl::None).
#pragma once

#include "ReliableUDP/Detail/CongestionController.h"
#include "ReliableUDP/Detail/NewReno.h"

namespace timerwheel::rudp::detail {

// For a path owned end to end whose capacity is known: only the peer's receive window limits
// sending, and nothing is paced. The window NewReno would have (without HyStart++) is still kept,
// as a statistic: it shows what a congestion-controlled sender would have been allowed.
class KnownPathController final : public ICongestionController {
 public:
  explicit KnownPathController(std::size_t maxDatagramSize)
      : m_shadow(NewRenoOptions{maxDatagramSize, /*hyStart*/ false, /*paced*/ false}) {}

  void OnPacketSent(SentPacket& packet, std::uint64_t bytesInFlight) noexcept override {
    m_shadow.OnPacketSent(packet, bytesInFlight);
  }
  void OnPacketAcked(const SentPacket& packet, Microseconds now) noexcept override {
    m_shadow.OnPacketAcked(packet, now);
  }
  bool OnPacketsLost(Microseconds largestLostSentTime, std::uint64_t lostBytes,
                     Microseconds now) noexcept override {
    return m_shadow.OnPacketsLost(largestLostSentTime, lostBytes, now);
  }
  void OnPersistentCongestion() noexcept override { m_shadow.OnPersistentCongestion(); }
  void OnAckProcessed(const AckEvent& ack) noexcept override { m_shadow.OnAckProcessed(ack); }
  void OnInFlightDiscarded() noexcept override { m_shadow.OnInFlightDiscarded(); }

  std::uint64_t Window() const noexcept override { return m_shadow.Window(); }
  bool LimitsSending() const noexcept override { return false; }
  const CongestionStatistics& Statistics() const noexcept override { return m_shadow.Statistics(); }

 private:
  NewReno m_shadow;
};

}  // namespace timerwheel::rudp::detail
