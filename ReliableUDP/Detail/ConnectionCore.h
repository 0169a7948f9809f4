// The protocol engine of one connection: handshake (client side), reliable ordered stream of
// messages, loss recovery, congestion and flow control, liveness and close.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "ReliableUDP/Detail/AckTracker.h"
#include "ReliableUDP/Detail/ConnectionKeys.h"
#include "ReliableUDP/Detail/EndpointContext.h"
#include "ReliableUDP/Detail/LossRecovery.h"
#include "ReliableUDP/Detail/PacketNumberSkipper.h"
#include "ReliableUDP/Detail/ReceiveBuffer.h"
#include "ReliableUDP/Detail/SendBuffer.h"
#include "ReliableUDP/Detail/TimerTarget.h"
#include "ReliableUDP/Detail/VectorQueue.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Statistics.h"
#include "TimerQueue/TimerHandle.h"

namespace timerwheel::rudp::detail {

using SendHandler = Completion;
using ReceiveHandler = Completion;
using CloseHandler = Completion;

// Thread safety: none. The caller serialises every call into the endpoint and its connections
// (EndpointCore), and user handlers are handed to IEndpointIo::Post, never run here.
//
// Lifecycle (graceful close is two-way, like TCP's FIN):
//   Connecting (client)  --Welcome-->  Established
//   Established  --Close(), or the peer's CLOSE-->  Closing: queued data still goes out; our
//       CLOSE follows once all of it is acknowledged
//   Closing  --our CLOSE acknowledged and the peer's received-->  Draining (ACKs only, 3 PTOs)
//       -->  Closed
//   any state  --Abort(), idle timeout, protocol error, endpoint shutdown-->  Closed
// The end reason is fixed by the first of these (ClosedLocally or ClosedByPeer for a graceful
// close: who closed first); pending operations complete with it, except that messages already
// received are still delivered after a graceful close.
//
// Timers (one ITimerQueue timer per kind, each created on first use, never per packet): loss
// detection/PTO (or handshake retransmission), delayed ACK, pacing, keepalive, and the connection
// deadline (the idle timeout, or the handshake timeout, or the end of the draining period). A timer
// is re-armed only when its deadline in whole milliseconds changes; an expiry already detached when
// it was re-armed or cancelled is ignored.
//
// Liveness: the idle timer restarts whenever the peer newly acknowledges an ack-eliciting packet
// of ours (ACKs of ACK-only packets do not count: a replay could produce them), so a peer that
// still sends but no longer receives (one-way loss) is detected as well as a silent one. And
// while stream data waits to be acknowledged, the oldest waiting byte must be acknowledged within
// the idle timeout, or the connection ends with TimedOut all the same (RFC 9000 21.6, slowloris: a
// peer acknowledging our PINGs but never our data). A keepalive PING goes after keepaliveInterval
// (servers: 1.5 times that) without an ack-eliciting packet sent or received; a lone PING after a
// quiet spell is answered with ACK + PING, so both sides see their packets acknowledged while only
// one side's keepalive timer fires.
class ConnectionCore final : private IPacketFate {
 public:
  enum class Role : std::uint8_t { Client, Server };
  enum class Phase : std::uint8_t { Connecting, Established, Closing, Draining, Closed };
  // Where our half of a graceful close is (Phase::Closing; NotRequested before it). Each side
  // sends CLOSE once every byte it was asked to send is acknowledged; the connection drains once
  // ours is acknowledged and the peer's has arrived.
  enum class OurClose : std::uint8_t {
    NotRequested,  // Close() not called and no CLOSE from the peer
    AwaitingAcks,  // requested: waits until everything sent before it is acknowledged
    ToSend,        // our CLOSE must be sent (again, if it was lost or a probe is due)
    InFlight,      // sent, not yet acknowledged
    Acknowledged,  // the peer has it
  };

  // slot: where the endpoint keeps this connection; every timer of it carries the slot (with its
  // kind) in its user data.
  ConnectionCore(EndpointContext& context, Role role, ConnectionId localId, const Address& remote,
                 ConnectionSlot slot);
  ~ConnectionCore();
  ConnectionCore(const ConnectionCore&) = delete;
  ConnectionCore& operator=(const ConnectionCore&) = delete;

  // --- Handshake --------------------------------------------------------------------------
  void StartClient(Microseconds now);  // sends Hello, arms handshake timers
  // Server side, on a valid HelloWithCookie: peer's CID and parameters; sends Welcome.
  void StartServer(ConnectionId peerId, const TransportParameters& peer,
                   const ResetToken& peerResetToken, Microseconds now);
  void OnCookie(const PacketHeader& header, Microseconds now);
  void OnWelcome(const PacketHeader& header, Microseconds now);
  void OnRepeatedHelloWithCookie(Microseconds now);  // our Welcome was lost: send it again

  // The encrypted handshake (options.serverSecretKey / serverPublicKey; docs/reliable-udp.md,
  // "Encryption"). Server side: what the endpoint derived from the client's SecureHelloWithCookie.
  // Its secrets wipe themselves when it goes (PacketKey, TrafficSecrets), on every path.
  struct SecureStart {
    X25519Key ephemeralPublic{};  // ours, sent in the Welcome
    PacketKey welcomeKey;
    TrafficSecrets secrets;
    AeadAlgorithm algorithm = AeadAlgorithm::ChaCha20Poly1305;
  };
  // clientToken: what the client sealed in its handshake (EndpointOptions::clientToken), copied.
  void StartSecureServer(ConnectionId peerId, const TransportParameters& peer,
                         const ResetToken& peerResetToken, const SecureStart& start,
                         const std::uint8_t* clientToken, std::size_t clientTokenSize,
                         Microseconds now);
  // Server side of an encrypted connection: the client's token (empty: none).
  const std::vector<std::uint8_t>& ClientToken() const noexcept;
  // Client: the server's SecureWelcome (datagram: all of it, opened in a copy). True if it
  // established the connection; a Welcome that does not open ends it with AuthenticationFailed.
  bool OnSecureWelcome(const DecodedPacket& packet, const std::uint8_t* datagram, std::size_t size,
                       Microseconds now);
  // Client, while connecting: the server cannot authenticate the handshake. Ends the connection
  // with AuthenticationFailed.
  void OnAuthRefusal();
  bool IsEncrypted() const noexcept { return m_keys != nullptr; }
  // The key phase (key updates so far); 0 for a plaintext connection.
  std::uint64_t KeyPhase() const noexcept { return m_keys ? m_keys->Phase() : 0; }
  // The packet keys (nullptr: plaintext). For tests and fuzzers that seal packets as this
  // connection would, to reach the frame decoder behind the AEAD.
  ConnectionKeys* Keys() noexcept { return m_keys.get(); }
  // Client, while connecting: the server refused (ServerBusy). Ends the connection.
  void OnRefusal();
  // The peer sent a Reset with this connection's token: it has lost the connection. Ends it
  // with ConnectionReset (a draining connection just ends sooner).
  void OnStatelessReset();
  // The reset token the peer gave for its connection ID (all zero: none, or not known yet).
  const ResetToken& PeerResetToken() const noexcept { return m_peerResetToken; }

  // --- Network ----------------------------------------------------------------------------
  void OnDataPacket(const DecodedPacket& packet, std::size_t datagramSize, Microseconds now);
  // A SecureData packet: opened in a copy of `datagram`, then handled as OnDataPacket; dropped
  // (nothing else changes) if it does not authenticate, except that the failure that reaches
  // the AEAD's integrity limit ends the connection with AuthenticationFailed (ConnectionKeys.h).
  void OnSecureDataPacket(const DecodedPacket& packet, const std::uint8_t* datagram,
                          std::size_t size, Microseconds now);
  void OnTimer(TimerKind kind, Microseconds now);

  // --- Application ------------------------------------------------------------------------
  // Each takes `handler` unless it throws (std::bad_alloc: the operation's queue could not grow,
  // or the completion of one refused at once could not be posted), having changed nothing: then
  // the handler is still the caller's, so that the caller can destroy it once it holds no lock
  // (it may hold the last reference to the public Connection, whose end takes the lock). Once
  // the operation is queued they do not throw (AfterQueuing).
  void Send(const std::uint8_t* data, std::size_t size, SendHandler& handler, Microseconds now);
  void Send(const std::uint8_t* data, std::size_t size, SendHandler&& handler, Microseconds now) {
    Send(data, size, handler, now);
  }
  // Reads the clock only if a window update is waiting to go (a receive is queued per message:
  // a clock read each was 1 % of a busy server's thread).
  void Receive(std::vector<std::uint8_t>& message, ReceiveHandler& handler);
  void Receive(std::vector<std::uint8_t>& message, ReceiveHandler&& handler) {
    Receive(message, handler);
  }
  void WaitClosed(CloseHandler& handler);
  void WaitClosed(CloseHandler&& handler) { WaitClosed(handler); }
  // The application dropped its last handle: pending receives complete with operation_aborted
  // (their buffers may be gone) and later messages are discarded.
  void AbandonReceives();
  void Close(Microseconds now);  // graceful
  void Abort(Microseconds now);
  // The endpoint is going away: end with `reason`, send nothing more, destroy the timers.
  void Shutdown(EngineError reason);

  ConnectionStatistics GetStatistics() const;
  ConnectionId LocalId() const noexcept { return m_localId; }
  ConnectionId PeerId() const noexcept { return m_peerId; }
  const Address& Remote() const noexcept { return m_remote; }
  Role GetRole() const noexcept { return m_role; }
  Phase GetPhase() const noexcept { return m_phase; }
  // Sends are accepted: neither side has begun to close, and the connection has not ended.
  bool IsOpen() const noexcept {
    return m_phase == Phase::Connecting || m_phase == Phase::Established;
  }
  EngineError EndReason() const noexcept { return m_endReason; }
  ConnectionSlot Slot() const noexcept { return m_slot; }

  // What happened since the last call (for the endpoint: connect completions, retirement).
  struct Events {
    bool established = false;  // Connecting -> Established (client)
    bool finished = false;     // Closed, timers destroyed: the endpoint may forget it
  };
  Events TakeEvents() noexcept;
  // A Terminate that a failed post cut short (see FinishTermination): the endpoint finishes it
  // at the connection's next event.
  bool TerminationUnfinished() const noexcept { return m_terminationUnfinished; }
  void FinishTermination();
  // Events taken whose handling failed (a completion that could not be posted): taken again by
  // the next call into this connection, or by the endpoint's shutdown.
  void PutBackEvents(Events events) noexcept {
    m_events.established |= events.established;
    m_events.finished |= events.finished;
  }

 private:
  // An operation stays first in its queue until its completion is posted; `done` marks one
  // whose work is over (the message all in the send buffer, or read out), so that a pump after
  // a post that failed posts it without doing the work again.
  struct PendingSend {
    const std::uint8_t* data = nullptr;
    std::size_t size = 0;
    std::size_t copied = 0;
    bool prefixWritten = false;
    SendHandler handler;
    bool done = false;
  };
  struct PendingReceive {
    std::vector<std::uint8_t>* message = nullptr;
    ReceiveHandler handler;
    bool done = false;
    EngineError result = EngineError::None;  // once done
  };

  enum class PacketMode { AckOnly, Normal, Probe };

  // What the first pass over a Data packet's frames found. A packet of the usual kind (ACK,
  // STREAM, PING and padding frames, at most kRecordedStreams STREAM frames) is decoded once,
  // there: the later steps read the ACK and the STREAM frames from here instead of walking the
  // frames again (each walk decoded every frame: about 600 instructions a message, issue 19).
  static constexpr std::size_t kRecordedStreams = 4;
  struct FrameSummary {
    bool ackEliciting = false;
    bool onlyPing = true;  // nothing ack-eliciting but PING (keepalives and probes)
    bool recorded = true;  // false: another kind of packet; the later steps walk its frames
    bool hasAck = false;
    std::size_t streamCount = 0;
    std::array<StreamFrame, kRecordedStreams> streams{};
    // CheckFrames decodes every frame into this; a packet has at most one ACK frame, which no
    // later frame overwrites, so afterwards frame.ack is that ACK (when hasAck).
    Frame frame;
  };

  // OnDataPacket's steps, in order. Each returns false when the packet goes no further.
  // Validates every frame before anything changes, so a malformed or forged packet is dropped
  // whole.
  bool CheckFrames(const DecodedPacket& packet, FrameSummary& summary);
  // Stream data, before the packet is recorded as received: if it cannot be stored, the packet
  // must not be acknowledged, or the peer would never send it again.
  bool StoreStreamData(const DecodedPacket& packet, const FrameSummary& summary);
  bool StoreStream(const StreamFrame& stream);
  // Records the packet for our ACKs; false for a duplicate (answered by an ACK).
  bool RecordReceipt(const DecodedPacket& packet, const FrameSummary& summary,
                     std::size_t datagramSize, Microseconds now);
  // ACK, MAX_DATA and CLOSE frames; false if the connection ended. `reachedPeerAt`: when the
  // latest of our ACK-carrying packets its ACK frame newly acknowledged was sent (0: none).
  bool ApplyControlFrames(const DecodedPacket& packet, const FrameSummary& summary,
                          Microseconds now, Microseconds& reachedPeerAt);
  bool ApplyAck(const AckFrame& ack, Microseconds now, Microseconds& reachedPeerAt);
  // What the packet made possible: liveness, sends, our CLOSE, draining, deliveries, then Flush.
  void AfterDataPacket(Microseconds reachedPeerAt, Microseconds now);

  // IPacketFate
  void OnPacketAcked(const SentPacket& packet) override;
  void OnPacketLost(const SentPacket& packet) override;

  void SendHandshakePacket(Microseconds now);
  void SendWelcome();
  void EnterEstablished(const TransportParameters& peer, Microseconds now);
  TransportParameters OwnParameters() const;

  // Sends everything that may go now (ACKs, control frames, retransmissions, new data, probes),
  // within the congestion window and pacing; then re-arms the timers.
  void Flush(Microseconds now);
  bool HasAckElicitingToSend() const;
  bool HasMoreThanPingToSend() const;  // a close, a window update or stream data
  void SendPackets(Microseconds now);  // Flush's packets, up to what pacing and the window allow
  void SendDataPacket(Microseconds now, PacketMode mode);
  void SendAbortPacket(CloseCode code);
  // Sends the datagram `writer` built to the peer and counts it; returns its size.
  std::size_t Transmit(PacketWriter& writer);

  void PumpSends();
  void PumpReceives();
  // Runs `work` (the pump, and the flush) after the application queued an operation. The call
  // has taken the operation's handler by then, so it does not throw: a completion that cannot
  // be posted (no memory) stays first in its queue, and what was not copied or sent stays
  // queued; both go at the next pump and flush, which RetrySoon brings (a packet, a call or a
  // timer may come sooner).
  template <class Work>
  void AfterQueuing(Work&& work) {
    try {
      work();
    } catch (const std::bad_alloc&) {
      RetrySoon();
    }
  }
  // Arms the pacing timer kAllocationRetry ahead, unless it is armed already, and if it can (its
  // first arming allocates): its expiry pumps both queues and flushes (and retries again if that
  // fails). Without it, an operation whose pump or flush ran out of memory waited for the next
  // event, which on a quiet connection is the keepalive (15 s).
  void RetrySoon() noexcept;
  void MaybeUpdateMaxData();
  void MaybeQueueClose();
  void PrepareProbe();
  void ProtocolViolation();
  void BeginDraining(EngineError reason, Microseconds now);
  // With the end reason set: pending sends and close waiters complete with it; receives get
  // the messages still buffered (after a graceful close), then the reason.
  void CompletePendingOperations();
  // Closed: pending operations complete with the reason, timers destroyed, events.finished.
  void Terminate(EngineError reason);
  void Complete(Completion& handler, EngineError error);

  void ArmTimer(TimerKind kind, Microseconds deadline, Microseconds now);
  // The deadline timer's expiry (OnTimer): the keepalive, the connection's deadline, or both.
  void OnDeadlineTimer(Microseconds now);
  // Whether the armed deadline timer may stay for a new target `deadline`. The keepalive
  // deadline moves with every packet sent or received, tens of seconds away: re-arming per
  // packet would cost a busy connection a timer-queue operation per packet. The timer stays
  // while its expiry is at most an eighth of the wait early; if the connection goes quiet it
  // expires early and OnDeadlineTimer re-arms it for the rest, so the PING still goes at the
  // deadline. A quiet connection (one re-arm per round: a PING, or a PING and its answer) moves
  // the target by a whole round, so it re-arms and never sees such an expiry.
  bool DeadlineTimerMayStay(Microseconds deadline, Microseconds now) const;
  // The peer's ACK frame `ack` acknowledged some of m_sentAcks: m_acks forgets what they reported.
  // Returns when the latest of those was sent (rounded down to the ms), 0 if none.
  Microseconds ForgetAcknowledgedAckRanges(const AckFrame& ack, Microseconds now);
  void CancelTimer(TimerKind kind);
  // Cancels it and gives its record back to the queue (made again on the next arming).
  void DestroyTimer(TimerKind kind);
  // The peer is known to have heard from us at `provenAt` (<= now): the idle deadline is the idle
  // timeout after it (or sooner: the oldest waiting byte's).
  void RestartIdleTimer(Microseconds provenAt, Microseconds now);
  // At the idle deadline: whether one PING may still save the connection (OnTimer).
  bool MayProbeLiveness() const noexcept;
  // When the connection ends unless something happens first: the earlier of m_idleDeadline and
  // the previous key phase's deadline (when set).
  Microseconds ConnectionDeadline() const noexcept;
  // Arms the deadline timer (the queue timer of both the Keepalive and the ConnectionDeadline
  // kind, QueueTimer) at the earlier of the keepalive deadline and ConnectionDeadline(), counted
  // as an arming of the earlier one's kind. One queue timer serves both: an idle
  // connection's round re-arms one timer, not two, and holds one record fewer (Perf/RESULTS.md,
  // issue 18).
  void ArmDeadlineTimer(Microseconds now);
  // After the keys sealed or opened a packet: if that changed the key phase, the previous
  // phase's key is to go 3 PTOs from now.
  void AfterKeyUse(Microseconds now);
  // Our keepalive interval (the client's; a server waits half as long again).
  Microseconds KeepaliveInterval() const;
  // A keepalive interval from now (the server's half as long again), less this round's jitter.
  Microseconds NextKeepaliveDeadline(Microseconds now) const;
  void RestartKeepaliveTimer(Microseconds now);
  // A new shortening of the keepalive interval for the next round.
  void DrawKeepaliveJitter();
  void ReleaseIdleMemory();
  void UpdateLossTimer(Microseconds now);
  void UpdateAckTimer(Microseconds now);
  Microseconds IdleTimeout() const;

  EndpointContext& m_context;
  const Role m_role;
  Phase m_phase = Phase::Connecting;
  EngineError m_endReason = EngineError::None;
  bool m_terminationUnfinished = false;  // see FinishTermination
  Events m_events;
  const ConnectionId m_localId;
  std::uint64_t m_jitterState;             // the keepalive jitter's generator, seeded by m_localId
  Microseconds m_keepaliveShortening = 0;  // of this round's keepalive interval
  ConnectionId m_peerId = 0;
  Address m_remote;
  const ConnectionSlot m_slot;

  // Encryption. Client, while connecting: its ephemeral key and the key schedule after "e, es".
  // Each member wipes itself when the handshake goes (X25519KeyPair, KeySchedule, PacketKey).
  struct ClientHandshake {
    explicit ClientHandshake(const X25519Key& serverKey) : schedule(serverKey) {}
    X25519KeyPair ephemeral;
    KeySchedule schedule;
    PacketKey helloKey;
  };
  // What a plaintext server connection that is established and quiet never uses, made on first
  // use: the client's handshake, the encrypted handshake's leftovers, close waiters, the
  // bookkeeping of duplicates and violations. Every idle connection pays 8 bytes for it, not 130.
  struct Cold {
    // Handshake (client).
    bool haveCookie = false;
    unsigned handshakeAttempts = 0;
    std::array<std::uint8_t, kCookieSize> cookie{};
    std::unique_ptr<ClientHandshake> clientHandshake;
    std::unique_ptr<SecureStart> secureStart;  // server: to repeat its Welcome (secrets wiped)
    std::vector<std::uint8_t> clientToken;     // server: the client's, from its handshake
    // When the previous key phase's receive key goes (0: none held, or plaintext). It shares
    // the ConnectionDeadline timer: a key update costs no timer of its own.
    Microseconds previousKeyDeadline = 0;
    std::vector<CloseHandler> closeWaiters;
    unsigned violations = 0;
    // Reflection bound: immediate ACKs for duplicates at most once per RTT, and their bytes at
    // most kReflectionFactor times the duplicates' bytes.
    Microseconds nextDuplicateAck = 0;
    std::uint64_t duplicateBytesReceived = 0;
    std::uint64_t duplicateAckBytesSent = 0;
    std::uint64_t duplicatePacketsReceived = 0;  // statistics
  };
  std::unique_ptr<Cold> m_cold;
  Cold& MakeCold();
  Microseconds PreviousKeyDeadline() const noexcept {
    return m_cold ? m_cold->previousKeyDeadline : 0;
  }
  std::unique_ptr<ConnectionKeys> m_keys;  // an encrypted connection's packet keys
  void PrepareClientHandshake();
  // Plaintext packets of a connection that is, or is becoming, encrypted are dropped.
  bool ExpectsEncryption() const noexcept {
    return m_keys != nullptr || (m_cold && m_cold->clientHandshake);
  }
  ResetToken m_peerResetToken{};

  // Sending. The stream's send side is made by the first Send: a connection that never sends
  // (an idle one) holds 8 bytes for it, not 150.
  struct Sending {
    Sending(ChunkPool& pool, std::size_t capacity) : buffer(pool, capacity) {}
    SendBuffer buffer;
    VectorQueue<PendingSend> pending;
    // Since when the oldest unacknowledged stream byte (ackedPrefixSeen) has waited (0: not
    // known yet, or nothing waits): it must move within the idle timeout (slowloris).
    std::uint64_t ackedPrefixSeen = 0;
    Microseconds oldestDataSince = 0;
    // Statistics of the stream's send side.
    std::uint64_t messagesSent = 0;
    std::uint64_t streamBytesSent = 0;
    std::uint64_t streamBytesRetransmitted = 0;
    std::uint64_t packetsRetransmitted = 0;
    std::uint32_t flowControlStalls = 0;
  };
  std::unique_ptr<Sending> m_sending;
  Sending& MakeSending();
  // The send side's offsets and next range (none before the first Send).
  std::uint64_t AckedPrefix() const noexcept;
  std::uint64_t NextNewOffset() const noexcept;
  bool NextToSend(std::size_t maxSize, SendBuffer::Range& range) const noexcept;
  LossRecovery m_loss;
  PacketNumberSkipper m_packetNumbers;  // with unpredictable gaps: the optimistic-ACK defence
  std::uint64_t m_peerMaxData = 0;      // flow-control limit on our stream offsets
  unsigned m_probesToSend = 0;
  std::uint32_t m_sendDatagramSize;  // min(ours, the peer's maxDatagramSize)
  bool m_pingPending = false;
  bool m_maxDataPending = false;
  // Graceful close is two-way, like TCP's FIN: each side sends CLOSE once every byte it was
  // asked to send is acknowledged, and the connection ends when both CLOSEs are through.
  OurClose m_ourClose = OurClose::NotRequested;
  bool m_peerClosed = false;  // the peer's CLOSE arrived: it will send nothing more
  EngineError m_closeReason = EngineError::None;  // ClosedLocally or ClosedByPeer: who closed first
  bool m_flowControlBlocked = false;
  std::uint64_t m_peerMaxMessageSize;  // the peer's maxMessageSize (ours until the handshake)

  // Receiving. The stream's receive buffer is made by the first STREAM frame (an idle connection
  // never has one); before it, the window is all there is to know.
  std::unique_ptr<ReceiveBuffer> m_receiveBuffer;
  ReceiveBuffer& MakeReceiveBuffer();
  // How long without traffic makes a quiet spell: half a keepalive interval (at most a quarter
  // of the idle timeout).
  Microseconds QuietInterval() const;
  // The end of the stream's in-order prefix (0 before any STREAM frame).
  std::uint64_t ContiguousReceived() const noexcept;
  std::uint64_t ReceiveLimit() const noexcept;  // the flow-control limit we may advertise
  AckTracker m_acks;
  // Our latest packets that carried an ACK frame, each with that frame's largest acknowledged (a
  // ring): once the peer acknowledges one, m_acks stops reporting what it reported (RFC 9000
  // 13.2.4), and we know the peer heard from us when we sent it (liveness). Most are ACK-only
  // packets, which the sent-packet log does not keep.
  struct SentAck {
    PacketNumber packet = 0;
    PacketNumber largest = 0;
  };
  std::array<SentAck, 8> m_sentAcks{};
  // When each was sent: the low 32 bits of the time in ms (ages up to 49 days), apart from
  // m_sentAcks so that each costs 4 bytes, not the 8 of padding.
  std::array<std::uint32_t, 8> m_sentAckMs{};
  std::uint8_t m_sentAckPending = 0;  // bit i: m_sentAcks[i] is not acknowledged yet
  std::uint8_t m_nextSentAck = 0;
  bool m_receivesAbandoned = false;
  // Liveness, per data packet: the peer newly acknowledged an ack-eliciting packet of ours.
  bool m_progress = false;
  // Since the last proof of liveness, the peer sent us a new ack-eliciting packet, and the
  // idle deadline's one PING of grace (OnTimer) was used.
  bool m_peerTalked = false;
  bool m_livenessGraceUsed = false;
  std::uint32_t m_peerIdleTimeoutMs = 0;  // from the peer's transport parameters (clamped)
  std::uint64_t m_advertisedMaxData = 0;
  VectorQueue<PendingReceive> m_pendingReceives;

  // Timers.
  // Created on first use: an idle connection never needs its pacing or delayed-ACK timer, and
  // its loss-detection timer only while a keepalive is in flight (until it sends more than PINGs:
  // UpdateLossTimer).
  // One per kind, but one for the keepalive and the connection's deadline together (QueueTimer).
  std::array<TimerHandle, kTimerKindCount - 1> m_timers{};
  std::array<Microseconds, kTimerKindCount - 1> m_armedMs{};  // armed deadline in ms (0: not armed)
  // When the next keepalive PING is due (0: none). No timer of its own: the deadline timer.
  Microseconds m_keepaliveDeadline = 0;
  // When the ConnectionDeadline timer ends the connection (idle timeout, handshake timeout, end of
  // draining). Its timer may be clamped to the queue's maximum timeout: it fires early, re-arms.
  Microseconds m_idleDeadline = 0;

  // What GetStatistics reports beyond LossRecovery's figures. Kept apart from
  // ConnectionStatistics (whose RTT and congestion fields come from LossRecovery) because every
  // idle connection pays for each byte here: the send side's counters are in Sending, those of
  // duplicates in Cold.
  struct Counters {
    std::uint64_t packetsSent = 0;
    std::uint64_t packetsReceived = 0;
    std::uint64_t bytesSent = 0;
    std::uint64_t bytesReceived = 0;
    std::uint64_t messagesReceived = 0;
    std::array<std::uint32_t, kTimerKindCount> timerArmed{};
    std::array<std::uint32_t, kTimerKindCount> timerFired{};
  };
  Counters m_stats;
};

}  // namespace timerwheel::rudp::detail
