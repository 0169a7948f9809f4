// The interface between loss recovery and a congestion controller (RFC 9002 7 and B).
#pragma once

#include <cstdint>

#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SentPacketLog.h"

namespace timerwheel::rudp::detail {

struct CongestionStatistics {
  std::uint64_t congestionEvents = 0;       // window reductions
  std::uint64_t persistentCongestion = 0;   // collapses to the minimum window
  std::uint64_t slowStartExitsOnDelay = 0;  // HyStart++ exits from slow start (RFC 9406)
};

// What one ACK frame that acknowledged something new did, once its losses are declared.
struct AckEvent {
  Microseconds now = 0;
  PacketNumber largestAcked = 0;      // the largest packet number ever acknowledged
  PacketNumber nextPacketNumber = 0;  // one past the largest sent
  std::uint64_t bytesInFlight = 0;    // after this ACK and its losses
  bool windowReduced = false;         // its losses reduced the window: no growth from it
  bool hasRttSample = false;          // it gave an RTT sample, `latestRtt`
  Microseconds latestRtt = 0;
};

// Loss recovery (which owns the sent-packet log, bytes in flight and the RTT estimate) tells the
// controller what happened; the controller keeps the congestion window. Calls for one ACK come
// in this order: OnPacketAcked for each newly acknowledged packet still in flight, OnPacketsLost
// (and OnPersistentCongestion) for the losses it reveals, then OnAckProcessed.
//
// Implementations: NewReno (with HyStart++), the known-path profile (KnownPathController); a
// model-based controller will join them. Not thread-safe; no call allocates.
class ICongestionController {
 public:
  virtual ~ICongestionController() = default;

  // A packet went into flight; `bytesInFlight` includes it.
  virtual void OnPacketSent(std::uint64_t bytesInFlight) noexcept = 0;
  // A packet in flight was acknowledged (not one declared lost before).
  virtual void OnPacketAcked(const SentPacket& packet) noexcept = 0;
  // Packets were declared lost, the most recently sent of them at `largestLostSentTime`.
  // Returns true if the window was reduced.
  virtual bool OnPacketsLost(Microseconds largestLostSentTime, Microseconds now) noexcept = 0;
  // RFC 9002 7.6: the losses span more than 3 PTOs with nothing acknowledged between.
  virtual void OnPersistentCongestion() noexcept = 0;
  virtual void OnAckProcessed(const AckEvent& ack) noexcept = 0;
  // Everything in flight was forgotten (the connection closed).
  virtual void OnInFlightDiscarded() noexcept = 0;

  // Bytes that may be in flight (reported even by a controller that does not limit sending).
  virtual std::uint64_t Window() const noexcept = 0;
  // False: the window is a statistic only, and neither it nor pacing limits sending.
  virtual bool LimitsSending() const noexcept = 0;
  virtual const CongestionStatistics& Statistics() const noexcept = 0;
};

}  // namespace timerwheel::rudp::detail
