// Loss detection and probe timeouts for one connection (RFC 9002 6), over its parts: the sent-
// packet log, the RTT estimator, a congestion controller and the pacer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "ReliableUDP/Detail/CongestionController.h"
#include "ReliableUDP/Detail/Pacer.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/RttEstimator.h"
#include "ReliableUDP/Detail/SentPacketLog.h"
#include "ReliableUDP/Detail/WireFormat.h"

namespace timerwheel::rudp::detail {

// How the connection learns the fate of what its packets carried.
class IPacketFate {
 public:
  virtual void OnPacketAcked(const SentPacket& packet) = 0;
  virtual void OnPacketLost(const SentPacket& packet) = 0;

 protected:
  ~IPacketFate() = default;
};

struct LossRecoveryOptions {
  std::size_t maxDatagramSize = 1200;
  bool congestionControl = true;  // false: the "known path" profile (KnownPathController)
  bool pacing = true;             // with congestion control: pace (Pacer)
  bool modelBased = false;        // with congestion control: Bbr instead of NewReno
  // Seeds what the controller draws at random (Bbr's probe waits). Each connection's own, so that
  // flows sharing a bottleneck do not probe in step.
  std::uint32_t controllerSeed = 0;
};

// A snapshot, assembled from the parts when asked for.
struct LossRecoveryStatistics {
  Microseconds smoothedRtt = 0;  // 0 until the first sample
  Microseconds rttVariation = 0;
  Microseconds minRtt = 0;
  Microseconds latestRtt = 0;
  std::uint64_t congestionWindow = 0;
  std::uint64_t bytesInFlight = 0;
  std::uint64_t packetsAcked = 0;
  std::uint64_t packetsLost = 0;
  std::uint64_t spuriousLosses = 0;         // declared lost, acknowledged later
  std::uint64_t probeTimeouts = 0;          // PTO expirations
  std::uint64_t congestionEvents = 0;       // window reductions
  std::uint64_t persistentCongestion = 0;   // collapses to the minimum window
  std::uint64_t slowStartExitsOnDelay = 0;  // HyStart++ exits from slow start to CSS (RFC 9406)
};

// RFC 9002, sections 5-7 and appendices A/B. This class owns loss detection and the PTO:
//  - Loss: a packet is lost when a later one is acked and it is kPacketThreshold (3) older, or
//    it was sent more than RttEstimator::LossDelay() before now.
//  - PTO = RttEstimator::ProbeTimeout() times 2^consecutive PTOs (at most kMaxPtoBackoff); for a
//    flight of PINGs alone, at least the ping probe floor (SetPingProbeFloor). A lost keepalive
//    needs no fast recovery (the next keepalive comes anyway, and the idle timeout covers a dead
//    peer), while probing it every few RTTs, doubling, is what turns an overloaded receiver
//    into a collapse: every unanswered keepalive starts a train of probes into the same
//    overloaded socket (issue 18: 1.6 M probes in 60 s from 100k idle connections).
//  - Persistent congestion: lost ack-eliciting packets sent after the first RTT sample spanning
//    more than 3 PTOs (without backoff) with nothing acknowledged between them.
// and hands the rest to its parts: the records to SentPacketLog, RTT to RttEstimator, the window
// to an ICongestionController (NewReno or Bbr, or KnownPathController when congestionControl is
// off), pacing to Pacer (only when the controller limits sending and pacing is on; at the
// controller's pacing rate when it has one).
//
// The controller is made by the first packet that carries more than a PING (stream data,
// MAX_DATA, CLOSE): an idle connection, which sends only keepalives, never pays for one (Bbr
// holds 552 bytes; issue 18's C1M server holds a million idle connections). Until then the
// window and pacing rate are a new controller's, and what happens to PINGs sent before it is not
// reported to it (their RTT samples still reach the RTT estimator; a lost keepalive is not a
// congestion signal, and the idle timeout covers a dead peer).
// Not thread-safe (the engine's caller serialises it); IPacketFate callbacks must not call back
// into this object. Steady state allocates nothing (the controller is allocated once).
class LossRecovery {
 public:
  explicit LossRecovery(const LossRecoveryOptions& options);
  ~LossRecovery();
  LossRecovery(const LossRecovery&) = delete;
  LossRecovery& operator=(const LossRecovery&) = delete;

  // Once the handshake has told us the peer's max ACK delay (before: 0).
  void SetPeerMaxAckDelay(Microseconds maxAckDelay) noexcept;
  // Once the handshake has settled the size of the datagrams the connection sends (the smaller of
  // both sides' maxDatagramSize), which may be below the size these options gave: the windows
  // (initial and minimum), the pacer's burst and the controller all count packets of that size,
  // and a window of 10 of our own 65507-byte datagrams is 109 of a peer's 1200-byte ones. Only
  // while there is no controller and nothing in flight (what is held was counted in the old size);
  // else throws std::logic_error, changing nothing (std::invalid_argument for a size of 0 or of
  // 2^32 and more). The pacer starts over, full: it held tokens of the old size, and with nothing
  // in flight a new connection's burst is all it grants.
  void SetMaxDatagramSize(std::size_t maxDatagramSize);
  // The least probe timeout of a flight that holds nothing but PINGs (0: none, the default).
  void SetPingProbeFloor(Microseconds floor) noexcept { m_pingProbeFloor = floor; }

  // Before a packet is built: what recording it will need (room in the log, and the controller if
  // it may carry more than a PING and there is none yet). May throw std::bad_alloc, changing
  // nothing a caller sees; after it, OnPacketSent for that packet does not throw. So a packet's
  // data is never sent without being recorded for retransmission.
  void PrepareToSend(bool mayCarryMoreThanPing);
  // Packet numbers passed here strictly increase. Consumes pacing tokens for in-flight packets.
  // Packets that are not ack-eliciting only advance the packet number: they are not tracked.
  void OnPacketSent(const SentPacket& packet);

  enum class AckResult {
    Ok,
    AckedUnsentPacket,  // acknowledges a number never sent (optimistic ACK): protocol error, no
                        // state changed
  };
  // Processes an ACK frame: newly acked packets (fate.OnPacketAcked), RTT sample (if the largest
  // is newly acked and ack-eliciting), loss detection (fate.OnPacketLost, window reduction), then
  // window growth (none from an ACK that reduced the window, as in RFC 9002 A.7). A packet already
  // declared lost that is now acked counts as a spurious loss and is passed to OnPacketAcked as
  // well (its data is acked). Resets the PTO backoff.
  AckResult OnAckReceived(const AckFrame& ack, Microseconds now, IPacketFate& fate);

  // When the loss-detection timer must fire (absolute), or nullopt when it should be off:
  // the earliest time-threshold loss time if any, else the PTO deadline if anything
  // ack-eliciting is in flight.
  std::optional<Microseconds> LossDetectionDeadline() const noexcept;

  // The timer fired. Declares time-threshold losses (returns 0), or it was a PTO: backs off and
  // returns how many probe packets to send now (1, or 2 after the first PTO). Probes bypass the
  // congestion window and pacing.
  unsigned OnLossDetectionTimeout(Microseconds now, IPacketFate& fate);

  // The sender has nothing to send (or is blocked by the peer's flow control): rate samples taken
  // from now until what is in flight is delivered measure the application, not the path.
  void OnApplicationLimited() noexcept;

  // Congestion window permits another in-flight packet of `bytes`.
  bool CanSend(std::size_t bytes) const noexcept;
  // The earliest time the pacer lets the next full-size packet go (<= now: send now).
  Microseconds NextSendTime(Microseconds now) const noexcept;

  bool HasAckElicitingInFlight() const noexcept { return m_ackElicitingInFlight > 0; }
  // When the latest ack-eliciting packet was sent (0: none yet).
  Microseconds LastAckElicitingSent() const noexcept { return m_lastAckElicitingSent; }
  // The smoothed RTT, or kInitialRtt before a sample.
  Microseconds SmoothedRtt() const noexcept {
    return m_rtt.HasSample() ? m_rtt.Smoothed() : kInitialRtt;
  }
  // PTO without backoff (used for idle-timeout floors and closing periods).
  Microseconds ProbeTimeout() const noexcept { return m_rtt.ProbeTimeout(); }
  LossRecoveryStatistics Statistics() const noexcept;
  // The controller's own figures (the model-based controller's estimates and phases; all zero
  // before it exists).
  const CongestionStatistics& CongestionControllerStatistics() const noexcept;
  // Whether the congestion controller exists yet (see above): diagnostics and tests.
  bool HasController() const noexcept { return m_congestion != nullptr; }
  // Sent packets still remembered (outstanding, or acked/lost but not yet forgotten): diagnostics.
  std::size_t RecordCount() const noexcept { return m_log.Count(); }
  // Records the sent-packet log has room for without growing: diagnostics and tests.
  std::size_t RecordCapacity() const noexcept { return m_log.Capacity(); }
  // At a quiet moment: the sent-packet log gives back the room a busy spell grew it to.
  void ReleaseIdleMemory() noexcept { m_log.ReleaseIdleMemory(); }
  // Sent-packet records looked at so far by ACK processing and loss detection: the cost of ACKs.
  std::uint64_t RecordsVisited() const noexcept { return m_log.RecordsVisited(); }

  // Forget everything in flight (connection closed).
  void DiscardAll() noexcept;

 private:
  Microseconds PtoDeadline() const noexcept;
  // The controller's figures, or a new controller's before it exists.
  std::uint64_t Window() const noexcept;
  bool LimitsSending() const noexcept;
  double PacingRate() const noexcept;
  bool Paced() const noexcept;
  void RefillPacer(Microseconds now) noexcept;
  // Declares losses, tells the controller; true if the window was reduced or collapsed.
  bool DetectLosses(Microseconds now, IPacketFate& fate);
  bool InPersistentCongestion(std::size_t firstIndex, std::size_t lastIndex) const noexcept;
  void Settle(Microseconds now) noexcept;  // hints and trimming after states changed

  LossRecoveryOptions Options() const noexcept;
  void StartController();  // the first packet that carries more than a PING needs one

  // The options, in 8 bytes instead of 16 (every connection has them); the seed is below, where
  // it fills what would otherwise be padding.
  std::uint32_t m_maxDatagramSize;
  bool m_congestionControl;
  bool m_pacing;
  bool m_modelBased;
  SentPacketLog m_log;
  RttEstimator m_rtt;
  std::unique_ptr<ICongestionController> m_congestion;  // null until needed (see above)
  Pacer m_pacer;
  std::uint64_t m_bytesInFlight = 0;
  // Packets in flight (32 bits: each has a record in the log, far fewer than 2^32).
  std::uint32_t m_ackElicitingInFlight = 0;
  std::uint32_t m_pingOnlyInFlight = 0;  // of those, the ones with nothing but a PING
  Microseconds m_pingProbeFloor = 0;
  PacketNumber m_largestAcked = 0;
  PacketNumber m_nextPacketNumber = 0;  // one past the largest sent
  // Consecutive PTOs, saturating: 16 bits are plenty, as only the backoff's shift (at most
  // kMaxPtoBackoff) and "more than one" are read from it.
  std::uint16_t m_ptoCount = 0;
  bool m_anyAcked = false;
  // The application ran out of data before the controller existed: it is told so when made.
  bool m_appLimitedBeforeController = false;
  std::uint32_t m_controllerSeed;
  Microseconds m_lastAckElicitingSent = 0;
  Microseconds m_lossTime = 0;  // 0: none
  std::uint64_t m_packetsAcked = 0;
  std::uint64_t m_packetsLost = 0;
  std::uint64_t m_spuriousLosses = 0;
  std::uint64_t m_probeTimeouts = 0;
};

}  // namespace timerwheel::rudp::detail
