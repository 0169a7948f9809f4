// The interface between loss recovery and a congestion controller (RFC 9002 7 and B).
#pragma once

#include <cstdint>

#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SentPacketLog.h"
#include "ReliableUDP/Statistics.h"

namespace timerwheel::rudp::detail {

struct CongestionStatistics {
  std::uint64_t congestionEvents = 0;      // window reductions
  std::uint64_t persistentCongestion = 0;  // collapses to the minimum window
  // Exits from slow start on a rising RTT: HyStart++ (RFC 9406) in NewReno, Startup's own queue
  // in Bbr.
  std::uint64_t slowStartExitsOnDelay = 0;
  // Model-based controllers (Bbr) only.
  std::uint64_t bandwidthEstimate = 0;  // bytes per second
  Microseconds minRttEstimate = 0;
  std::uint64_t congestiveLossRounds = 0;  // round trips whose loss counted as congestion
  std::uint64_t standingQueueRounds = 0;   // ProbeBW round trips that never emptied the queue
  Microseconds phaseMicroseconds[kCongestionPhaseCount] = {};
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
  Microseconds ackDelay = 0;  // the ACK delay the peer reported, capped at its max_ack_delay
};

// Loss recovery (which owns the sent-packet log, bytes in flight and the RTT estimate) tells the
// controller what happened; the controller keeps the congestion window. Calls for one ACK come
// in this order: OnPacketAcked for each newly acknowledged packet still in flight, OnPacketsLost
// (and OnPersistentCongestion) for the losses it reveals, then OnAckProcessed.
//
// Implementations: NewReno (with HyStart++), the known-path profile (KnownPathController) and the
// model-based Bbr. Not thread-safe; no call allocates.
class ICongestionController {
 public:
  virtual ~ICongestionController() = default;

  // A packet went into flight; `bytesInFlight` includes it. The controller may stamp the packet's
  // delivery-state fields (the record kept in the sent-packet log).
  virtual void OnPacketSent(SentPacket& packet, std::uint64_t bytesInFlight) noexcept = 0;
  // A packet in flight was acknowledged at `now` (not one declared lost before).
  virtual void OnPacketAcked(const SentPacket& packet, Microseconds now) noexcept = 0;
  // Packets of `lostBytes` in all were declared lost, the most recently sent of them at
  // `largestLostSentTime`. Returns true if the window was reduced.
  virtual bool OnPacketsLost(Microseconds largestLostSentTime, std::uint64_t lostBytes,
                             Microseconds now) noexcept = 0;
  // RFC 9002 7.6: the losses span more than 3 PTOs with nothing acknowledged between.
  virtual void OnPersistentCongestion() noexcept = 0;
  virtual void OnAckProcessed(const AckEvent& ack) noexcept = 0;
  // Everything in flight was forgotten (the connection closed).
  virtual void OnInFlightDiscarded() noexcept = 0;
  // The sender ran out of data to send (or of the peer's flow-control window) with
  // `bytesInFlight` in flight: what follows measures the application, not the path.
  virtual void OnApplicationLimited(std::uint64_t /*bytesInFlight*/) noexcept {}

  // The rate to pace at, bytes per second; 0: pace the window over the smoothed RTT (Pacer).
  virtual double PacingRate() const noexcept { return 0; }

  // Bytes that may be in flight (reported even by a controller that does not limit sending).
  virtual std::uint64_t Window() const noexcept = 0;
  // False: the window is a statistic only, and neither it nor pacing limits sending.
  virtual bool LimitsSending() const noexcept = 0;
  virtual const CongestionStatistics& Statistics() const noexcept = 0;
};

}  // namespace timerwheel::rudp::detail
