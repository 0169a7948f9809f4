// The protocol engine of one connection (see ConnectionCore.h for the lifecycle and timers).
#include "ReliableUDP/Detail/ConnectionCore.h"

#include <sodium.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/RoomForOne.h"

namespace timerwheel::rudp::detail {
namespace {

constexpr unsigned Index(TimerKind kind) { return static_cast<unsigned>(kind); }

// Which of the connection's queue timers serves a kind: its own, except that the keepalive and
// the connection's deadline share the last one (ArmDeadlineTimer).
static_assert(Index(TimerKind::Keepalive) + 1 == Index(TimerKind::ConnectionDeadline) &&
                  Index(TimerKind::ConnectionDeadline) + 1 == kTimerKindCount,
              "the two kinds the deadline timer serves come last");
constexpr unsigned QueueTimer(TimerKind kind) {
  return kind == TimerKind::ConnectionDeadline ? Index(TimerKind::Keepalive) : Index(kind);
}
constexpr unsigned kDeadlineTimer = QueueTimer(TimerKind::ConnectionDeadline);

// A peer that keeps sending packets that break the protocol (ACKs of unsent packets, data beyond
// the window) is disconnected; a few are dropped and counted, since without cryptography a
// forged packet must not be able to kill a connection by itself.
constexpr unsigned kMaxViolations = 100;

// How soon an application call whose pump or flush ran out of memory is retried (RetrySoon): soon
// against a keepalive, and seldom enough that a process short of memory does not spin on it.
constexpr Microseconds kAllocationRetry = 10'000;

// What ACKs drawn by duplicate packets may cost, relative to the duplicates' bytes (QUIC's
// anti-amplification factor, RFC 9000 8.1).
constexpr std::uint64_t kReflectionFactor = 3;

// Room for a STREAM frame's type, offset and length fields.
constexpr std::size_t kStreamFrameOverhead = 1 + 8 + 4;

// Seals a handshake packet under its one-use message key (packet number 0: each key seals one
// plaintext, resent unchanged).
class HandshakeSealer final : public IPacketSealer {
 public:
  explicit HandshakeSealer(const PacketKey& key) noexcept
      : m_protection(AeadAlgorithm::ChaCha20Poly1305, key) {}
  void Seal(std::uint8_t* packet, std::size_t authenticatedSize,
            std::size_t plaintextSize) noexcept override {
    m_protection.Seal(0, packet, authenticatedSize, plaintextSize);
  }

 private:
  PacketProtection m_protection;
};

// Seals a SecureData packet with the connection's current packet key.
class DataSealer final : public IPacketSealer {
 public:
  DataSealer(ConnectionKeys* keys, PacketNumber packetNumber) noexcept
      : m_keys(keys), m_packetNumber(packetNumber) {}
  void Seal(std::uint8_t* packet, std::size_t authenticatedSize,
            std::size_t plaintextSize) noexcept override {
    m_keys->Seal(m_packetNumber, packet, authenticatedSize, plaintextSize);
  }

 private:
  ConnectionKeys* m_keys;
  PacketNumber m_packetNumber;
};

}  // namespace

ConnectionCore::ConnectionCore(EndpointContext& context, Role role, ConnectionId localId,
                               const Address& remote, ConnectionSlot slot)
    : m_context(context),
      m_role(role),
      m_localId(localId),
      m_jitterState(localId | 1),
      m_remote(remote),
      m_slot(slot),
      m_loss(LossRecoveryOptions{context.options.maxDatagramSize,
                                 context.options.congestionControl != CongestionControl::None,
                                 context.options.pacing,
                                 context.options.congestionControl == CongestionControl::Bbr,
                                 // Beside the skipper's seed, not after it: a simulation's later
                                 // draws stay what they were.
                                 static_cast<std::uint32_t>(context.secrets.Companion())}),
      m_packetNumbers(context.secrets.Next()),
      m_sendDatagramSize(static_cast<std::uint32_t>(context.options.maxDatagramSize)),
      m_peerMaxMessageSize(context.options.maxMessageSize),
      m_acks(static_cast<Microseconds>(context.options.maxAckDelay) * 1000) {}

ConnectionCore::~ConnectionCore() {
  // Terminate destroys the timers; this covers a connection dropped before it ever ran.
  for (auto& timer : m_timers) {
    if (!timer.IsNull()) m_context.timers.DestroyTimer(timer);
  }
}

ConnectionCore::Cold& ConnectionCore::MakeCold() {
  if (!m_cold) m_cold = std::make_unique<Cold>();
  return *m_cold;
}

const std::vector<std::uint8_t>& ConnectionCore::ClientToken() const noexcept {
  static const std::vector<std::uint8_t> kNone;
  return m_cold ? m_cold->clientToken : kNone;
}

ConnectionCore::Sending& ConnectionCore::MakeSending() {
  if (!m_sending)
    m_sending = std::make_unique<Sending>(m_context.pool, m_context.options.sendBufferSize);
  return *m_sending;
}

Microseconds ConnectionCore::QuietInterval() const {
  return std::min(Microseconds{m_context.options.keepaliveInterval} * 1000 / 2, IdleTimeout() / 4);
}

std::uint64_t ConnectionCore::ContiguousReceived() const noexcept {
  return m_receiveBuffer ? m_receiveBuffer->ContiguousEnd() : 0;
}

ReceiveBuffer& ConnectionCore::MakeReceiveBuffer() {
  if (!m_receiveBuffer) {
    const auto& options = m_context.options;
    m_receiveBuffer = std::make_unique<ReceiveBuffer>(
        m_context.receivePool, options.receiveWindow, options.maxMessageSize,
        ReceiveBuffer::kDefaultMaxOutOfOrderRanges, options.maxReceiveMemoryPerConnection,
        static_cast<std::size_t>(
            std::min<std::uint64_t>(options.maxReceiveMemory, ReceiveBuffer::kUnlimited)));
  }
  return *m_receiveBuffer;
}

std::uint64_t ConnectionCore::AckedPrefix() const noexcept {
  return m_sending ? m_sending->buffer.AckedPrefix() : 0;
}

std::uint64_t ConnectionCore::NextNewOffset() const noexcept {
  return m_sending ? m_sending->buffer.NextNewOffset() : 0;
}

bool ConnectionCore::NextToSend(std::size_t maxSize, SendBuffer::Range& range) const noexcept {
  return m_sending && m_sending->buffer.NextToSend(maxSize, m_peerMaxData, range);
}

std::uint64_t ConnectionCore::ReceiveLimit() const noexcept {
  return m_receiveBuffer ? m_receiveBuffer->Limit() : m_context.options.receiveWindow;
}

ConnectionCore::Events ConnectionCore::TakeEvents() noexcept {
  return std::exchange(m_events, Events{});
}

// --- Handshake ---------------------------------------------------------------------------------

TransportParameters ConnectionCore::OwnParameters() const {
  const auto& options = m_context.options;
  TransportParameters parameters;
  // Advertise the worst case: the delayed-ACK timer may fire up to one granularity late.
  parameters.maxAckDelayMs = options.maxAckDelay + m_context.timerGranularity;
  parameters.initialMaxData = options.receiveWindow;
  parameters.maxDatagramSize = options.maxDatagramSize;
  parameters.idleTimeoutMs = options.idleTimeout;
  parameters.maxMessageSize = options.maxMessageSize;
  return parameters;
}

void ConnectionCore::StartClient(Microseconds now) {
  if (m_context.pinsServerKey) PrepareClientHandshake();
  SendHandshakePacket(now);
  m_idleDeadline = now + Microseconds{m_context.options.handshakeTimeout} * 1000;
  ArmDeadlineTimer(now);
}

void ConnectionCore::SendHandshakePacket(Microseconds now) {
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), buffer.size());
  Cold& cold = MakeCold();
  if (cold.haveCookie && cold.clientHandshake) {
    // The same ephemeral key and plaintext every time: a repeat differs only by its cookie.
    HandshakeSealer sealer(cold.clientHandshake->helloKey);
    writer.BeginSecureHelloWithCookie(
        m_localId, cold.cookie, cold.clientHandshake->ephemeral.publicKey, OwnParameters(),
        m_context.resetTokens.For(m_localId),
        m_context.aes256GcmAvailable ? kHandshakeFlagAes256Gcm : std::uint8_t{0}, sealer,
        m_context.options.clientToken.data(), m_context.options.clientToken.size());
    Transmit(writer);
  } else {
    if (cold.haveCookie) {
      writer.BeginHelloWithCookie(m_localId, cold.cookie, OwnParameters(),
                                  m_context.resetTokens.For(m_localId));
    } else {
      writer.BeginHello(m_localId);
    }
    Transmit(writer);
  }
  // RFC 6298: 1 s before any RTT sample, doubling on each retransmission.
  const unsigned backoff = std::min(cold.handshakeAttempts, kMaxPtoBackoff);
  ++cold.handshakeAttempts;
  ArmTimer(TimerKind::LossDetection, now + (kInitialPto << backoff), now);
}

void ConnectionCore::OnCookie(const PacketHeader& header, Microseconds now) {
  if (m_role != Role::Client || m_phase != Phase::Connecting) {
    ++m_context.stats.droppedUnexpected;
    return;
  }
  Cold& cold = MakeCold();
  // One Cookie per connect, as RFC 9000 (17.2.5.2) allows a client one Retry per attempt. A
  // Cookie carries no proof of the server (it needs no key), so answering each would send the
  // server 1,200 bytes for every 37-byte datagram anyone on the path sends from its address,
  // and a forged one after the real one would replace it, and with it the connect. The server
  // only sends another to a repeat of our Hello, for which the first one does as well.
  if (cold.haveCookie) {
    ++m_context.stats.droppedUnexpected;
    return;
  }
  cold.cookie = header.cookie;
  cold.haveCookie = true;
  cold.handshakeAttempts = 0;
  SendHandshakePacket(now);
}

void ConnectionCore::PrepareClientHandshake() {
  // Noise NK's first message, "e, es": an ephemeral key, and the pinned server key's DH with it.
  auto& clientHandshake = MakeCold().clientHandshake;
  clientHandshake = std::make_unique<ClientHandshake>(m_context.options.serverPublicKey);
  ClientHandshake& handshake = *clientHandshake;
  handshake.ephemeral = GenerateX25519KeyPair();
  handshake.schedule.MixHash(handshake.ephemeral.publicKey.data(),
                             handshake.ephemeral.publicKey.size());
  X25519Key shared{};
  // A pinned key of small order (ValidateOptions refuses one) gives no DH result: mixing none
  // would leave the hello and Welcome keys made of public values, which anyone could read and
  // answer. A random key instead makes this handshake one nobody can complete: it fails closed.
  if (!X25519(handshake.ephemeral.secretKey, m_context.options.serverPublicKey, shared)) {
    randombytes_buf(shared.data(), shared.size());
  }
  handshake.schedule.MixKey(shared);
  sodium_memzero(shared.data(), shared.size());
  handshake.helloKey = handshake.schedule.MessageKey("hello");
}

bool ConnectionCore::OnSecureWelcome(const DecodedPacket& packet, const std::uint8_t* datagram,
                                     std::size_t size, Microseconds now) {
  ClientHandshake* const handshake = m_cold ? m_cold->clientHandshake.get() : nullptr;
  if (m_role != Role::Client || m_phase != Phase::Connecting || handshake == nullptr) {
    ++m_context.stats.droppedUnexpected;  // e.g. a repeated Welcome
    return false;
  }
  // "e, ee": the server's ephemeral key. Only the holder of the pinned key's secret derived the
  // hello key, and so the welcome key.
  const PacketHeader& header = packet.header;
  KeySchedule schedule = handshake->schedule;
  schedule.MixHash(header.ephemeral.data(), header.ephemeral.size());
  X25519Key shared{};
  const bool agreed = X25519(handshake->ephemeral.secretKey, header.ephemeral, shared);
  schedule.MixKey(shared);
  sodium_memzero(shared.data(), shared.size());
  std::uint8_t* opened = m_context.opened.data();
  std::copy(datagram, datagram + size, opened);
  std::size_t plaintextSize = 0;
  const PacketProtection welcome(AeadAlgorithm::ChaCha20Poly1305, schedule.MessageKey("welcome"));
  TransportParameters parameters;
  ResetToken resetToken{};
  std::uint8_t flags = 0;
  if (!agreed ||
      !welcome.Open(0, opened, packet.authenticatedSize,
                    packet.authenticatedSize + packet.framesSize, plaintextSize) ||
      !DecodeHandshakePayload(opened + packet.authenticatedSize, plaintextSize, parameters,
                              resetToken, flags) ||
      !ParametersAreValid(parameters)) {
    ++m_context.stats.droppedAuthenticationFailed;
    Terminate(EngineError::AuthenticationFailed);
    return false;
  }
  const bool aes = (flags & kHandshakeFlagAes256Gcm) != 0 && m_context.aes256GcmAvailable;
  m_keys = std::make_unique<ConnectionKeys>(
      aes ? AeadAlgorithm::Aes256Gcm : AeadAlgorithm::ChaCha20Poly1305, schedule.Split(), true,
      m_context.packetsPerKey, m_context.integrityLimit);
  m_cold->clientHandshake.reset();
  m_peerId = header.source;
  m_peerResetToken = resetToken;
  EnterEstablished(parameters, now);
  m_events.established = true;
  return true;
}

void ConnectionCore::OnAuthRefusal() {
  if (m_role != Role::Client || m_phase != Phase::Connecting) {
    ++m_context.stats.droppedUnexpected;
    return;
  }
  Terminate(EngineError::AuthenticationFailed);
}

void ConnectionCore::StartSecureServer(ConnectionId peerId, const TransportParameters& peer,
                                       const ResetToken& peerResetToken, const SecureStart& start,
                                       const std::uint8_t* clientToken, std::size_t clientTokenSize,
                                       Microseconds now) {
  Cold& cold = MakeCold();
  if (clientTokenSize > 0) cold.clientToken.assign(clientToken, clientToken + clientTokenSize);
  m_keys = std::make_unique<ConnectionKeys>(start.algorithm, start.secrets, false,
                                            m_context.packetsPerKey, m_context.integrityLimit);
  cold.secureStart = std::make_unique<SecureStart>(start);
  cold.secureStart->secrets.Wipe();  // in m_keys now; only the Welcome key is needed again
  StartServer(peerId, peer, peerResetToken, now);
}

void ConnectionCore::OnWelcome(const PacketHeader& header, Microseconds now) {
  if (m_role != Role::Client || m_phase != Phase::Connecting) {
    ++m_context.stats.droppedUnexpected;  // e.g. a repeated Welcome
    return;
  }
  if (m_cold && m_cold->clientHandshake) {
    // We pinned a key and the server answers in plaintext: no downgrade.
    ++m_context.stats.droppedUnprotected;
    Terminate(EngineError::AuthenticationFailed);
    return;
  }
  m_peerId = header.source;
  m_peerResetToken = header.resetToken;
  EnterEstablished(header.parameters, now);
  m_events.established = true;
}

void ConnectionCore::OnRefusal() {
  if (m_role != Role::Client || m_phase != Phase::Connecting) {
    ++m_context.stats.droppedUnexpected;
    return;
  }
  Terminate(EngineError::ServerBusy);
}

void ConnectionCore::OnStatelessReset() {
  if (m_phase == Phase::Closed) return;
  // Both sides closed gracefully and ours waits only for the ACK of its CLOSE (sent once all our
  // data was acknowledged): the peer got that CLOSE and has since forgotten the connection, as it
  // may after its draining period when that ACK is lost. Nothing was lost, so the graceful reason
  // stands.
  const bool onlyOurCloseUnacknowledged =
      m_peerClosed && (m_ourClose == OurClose::InFlight || m_ourClose == OurClose::ToSend ||
                       m_ourClose == OurClose::Acknowledged);
  Terminate(onlyOurCloseUnacknowledged ? m_closeReason : EngineError::ConnectionReset);
}

void ConnectionCore::StartServer(ConnectionId peerId, const TransportParameters& peer,
                                 const ResetToken& peerResetToken, Microseconds now) {
  m_peerId = peerId;
  m_peerResetToken = peerResetToken;
  SendWelcome();
  EnterEstablished(peer, now);
}

void ConnectionCore::OnRepeatedHelloWithCookie(Microseconds) {
  if (m_phase == Phase::Established || m_phase == Phase::Closing) SendWelcome();
}

void ConnectionCore::SendWelcome() {
  // Smaller than the 1200-byte HelloWithCookie it answers: never an amplifier.
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), buffer.size());
  if (const SecureStart* const secureStart = m_cold ? m_cold->secureStart.get() : nullptr) {
    // Deterministic (same key, plaintext and nonce), so a repeat is the same datagram.
    HandshakeSealer sealer(secureStart->welcomeKey);
    writer.BeginSecureWelcome(m_peerId, m_localId, secureStart->ephemeralPublic, OwnParameters(),
                              m_context.resetTokens.For(m_localId),
                              secureStart->algorithm == AeadAlgorithm::Aes256Gcm
                                  ? kHandshakeFlagAes256Gcm
                                  : std::uint8_t{0},
                              sealer);
    Transmit(writer);
    return;
  }
  writer.BeginWelcome(m_peerId, m_localId, OwnParameters(), m_context.resetTokens.For(m_localId));
  Transmit(writer);
}

void ConnectionCore::EnterEstablished(const TransportParameters& peer, Microseconds now) {
  // Clamped: ours is a 32-bit count of milliseconds, and the smaller of the two is used.
  m_peerIdleTimeoutMs = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(peer.idleTimeoutMs, std::numeric_limits<std::uint32_t>::max()));
  m_sendDatagramSize = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(m_context.options.maxDatagramSize, peer.maxDatagramSize));
  // The windows and the pacer count packets of the size we send, not of our own maximum (a peer
  // that takes 1200 bytes while we take 65507 would see a first flight of 109 packets). Nothing
  // has gone through m_loss yet (Flush sends nothing while connecting; the handshake packets,
  // at most kHelloSize, are not recorded), so it takes the new size. Told here rather than built
  // here: a connecting connection already reports m_loss's figures in its statistics.
  m_loss.SetMaxDatagramSize(m_sendDatagramSize);
  m_peerMaxMessageSize = peer.maxMessageSize;
  m_peerMaxData = peer.initialMaxData;
  m_advertisedMaxData = ReceiveLimit();
  m_loss.SetPeerMaxAckDelay(peer.maxAckDelayMs * 1000);
  // A quarter of the keepalive interval: a lost keepalive is probed once or twice before the
  // next one, never in a doubling train of RTT-scale probes.
  m_loss.SetPingProbeFloor(KeepaliveInterval() / 4);
  m_phase = Phase::Established;
  CancelTimer(TimerKind::LossDetection);
  DrawKeepaliveJitter();
  m_keepaliveDeadline = NextKeepaliveDeadline(now);
  RestartIdleTimer(now, now);  // arms the deadline timer once, for both
}

// --- Receiving ---------------------------------------------------------------------------------

void ConnectionCore::OnDataPacket(const DecodedPacket& packet, std::size_t datagramSize,
                                  Microseconds now) {
  if (m_phase == Phase::Connecting || m_phase == Phase::Closed) {
    // A client has no peer ID before the Welcome; the server will send again.
    ++m_context.stats.droppedUnexpected;
    return;
  }
  if (packet.header.type == PacketType::Data && ExpectsEncryption()) {
    ++m_context.stats.droppedUnprotected;  // injected, or a downgrade attempt
    return;
  }
  FrameSummary summary;
  if (!CheckFrames(packet, summary)) return;
  if (!StoreStreamData(packet, summary)) return;
  if (!RecordReceipt(packet, summary, datagramSize, now)) return;
  Microseconds reachedPeerAt = 0;
  if (!ApplyControlFrames(packet, summary, now, reachedPeerAt)) return;
  AfterDataPacket(reachedPeerAt, now);
}

void ConnectionCore::OnSecureDataPacket(const DecodedPacket& packet, const std::uint8_t* datagram,
                                        std::size_t size, Microseconds now) {
  if (!m_keys) {
    ++m_context.stats.droppedUnexpected;  // a plaintext connection has no key to open it with
    return;
  }
  // In a copy (the datagram is const), into the endpoint's scratch buffer: no allocation.
  std::uint8_t* opened = m_context.opened.data();
  std::copy(datagram, datagram + size, opened);
  std::size_t plaintextSize = 0;
  if (!m_keys->Open(packet.header.packetNumber, packet.header.keyPhase, opened,
                    packet.authenticatedSize, size, plaintextSize)) {
    ++m_context.stats.droppedAuthenticationFailed;  // forged, altered, or another key's
    if (m_keys->IntegrityLimitReached()) {
      // RFC 9001 6.6: this many forgery attempts (2^36 for ChaCha20-Poly1305) and one may have
      // got through unseen: the keys are spent. The peer is told (under keys that still seal:
      // the limit is on opening), and the connection ends now.
      SendAbortPacket(CloseCode::Aborted);
      Terminate(EngineError::AuthenticationFailed);
    }
    return;
  }
  AfterKeyUse(now);
  DecodedPacket plaintext = packet;
  plaintext.frames = opened + packet.authenticatedSize;
  plaintext.framesSize = plaintextSize;
  OnDataPacket(plaintext, size, now);
}

bool ConnectionCore::CheckFrames(const DecodedPacket& packet, FrameSummary& summary) {
  FrameReader reader(packet.frames, packet.framesSize);
  Frame& frame = summary.frame;
  while (!reader.AtEnd()) {
    if (reader.Next(frame) != DecodeStatus::Ok) {
      ++m_context.stats.droppedMalformed;
      return false;
    }
    switch (frame.type) {
      case FrameType::Ack:
        // One ACK frame per packet: ours never send more (one frame holds every range we
        // remember), and a packet full of them would make the peer's ACKs cost a multiple of
        // the datagram's size to process.
        if (summary.hasAck || frame.ack.largest >= m_packetNumbers.Current()) {  // or never sent
          ProtocolViolation();
          return false;
        }
        summary.hasAck = true;
        // RFC 9000 21.4: a number we skipped was never sent, so a peer acknowledging it claims
        // packets it did not receive (an optimistic ACK, to inflate our window). No forgery
        // can hit a skipped number by chance often: the connection ends at once.
        for (std::size_t k = 0; k < frame.ack.rangeCount; ++k) {
          if (m_packetNumbers.Covers(frame.ack.ranges[k].smallest, frame.ack.ranges[k].largest)) {
            ++m_context.stats.droppedProtocolViolation;
            SendAbortPacket(CloseCode::ProtocolError);
            Terminate(EngineError::ProtocolError);
            return false;
          }
        }
        break;
      case FrameType::Stream:
        if (frame.stream.offset + frame.stream.length > ReceiveLimit()) {
          ProtocolViolation();  // beyond the window we advertised
          return false;
        }
        summary.ackEliciting = true;
        summary.onlyPing = false;
        if (summary.streamCount < kRecordedStreams) {
          summary.streams[summary.streamCount++] = frame.stream;
        } else {
          summary.recorded = false;
        }
        break;
      case FrameType::Ping:
        summary.ackEliciting = true;
        break;
      case FrameType::MaxData:
      case FrameType::Close:
        summary.ackEliciting = true;
        summary.onlyPing = false;
        summary.recorded = false;
        break;
      case FrameType::Padding:
        break;
    }
  }
  return true;
}

bool ConnectionCore::StoreStreamData(const DecodedPacket& packet, const FrameSummary& summary) {
  if (m_phase == Phase::Draining) return true;  // the application will read nothing more
  if (summary.recorded) {
    for (std::size_t i = 0; i < summary.streamCount; ++i) {
      if (!StoreStream(summary.streams[i])) return false;
    }
    return true;
  }
  FrameReader reader(packet.frames, packet.framesSize);
  Frame frame;
  while (!reader.AtEnd() && reader.Next(frame) == DecodeStatus::Ok) {
    if (frame.type == FrameType::Stream && !StoreStream(frame.stream)) return false;
  }
  return true;
}

bool ConnectionCore::StoreStream(const StreamFrame& stream) {
  // After its graceful CLOSE the peer has nothing more to send (it closes once all it sent is
  // acknowledged, and ApplyControlFrames checked that all of it is here): a late copy of what
  // came before is harmless, a byte beyond would reach a reader already told ClosedByPeer.
  if (m_peerClosed && stream.offset + stream.length > ContiguousReceived()) {
    ProtocolViolation();
    return false;
  }
  const auto result = MakeReceiveBuffer().Insert(stream.offset, stream.data, stream.length);
  if (result == ReceiveBuffer::InsertResult::TooFragmented) {
    ++m_context.stats.droppedTooFragmented;
    return false;
  }
  if (result == ReceiveBuffer::InsertResult::OverBudget) {
    ++m_context.stats.droppedOverMemoryBudget;  // unacknowledged: the peer sends it again
    return false;
  }
  if (result == ReceiveBuffer::InsertResult::BeyondWindow) {
    ProtocolViolation();
    return false;
  }
  return true;
}

bool ConnectionCore::RecordReceipt(const DecodedPacket& packet, const FrameSummary& summary,
                                   std::size_t datagramSize, Microseconds now) {
  const Microseconds previousArrival = m_acks.LargestArrival();  // before this packet's
  if (!m_acks.OnPacketReceived(packet.header.packetNumber, summary.ackEliciting, now)) {
    Cold& cold = MakeCold();
    ++cold.duplicatePacketsReceived;  // a duplicate or a replay: its data, if any, is known
    cold.duplicateBytesReceived += datagramSize;
    // Our ACK may have been lost: send another at once. But a replay must not make us a
    // reflector: at most one such ACK per RTT, and their bytes at most kReflectionFactor times
    // the duplicates' (plus the one ACK that crosses it). Our peers never resend a packet
    // number, so only the network's duplicates and replays land here.
    if (summary.ackEliciting && now >= cold.nextDuplicateAck &&
        cold.duplicateAckBytesSent < kReflectionFactor * cold.duplicateBytesReceived) {
      cold.nextDuplicateAck = now + std::max(m_loss.SmoothedRtt(), kTimerGranularity);
      m_acks.OnDuplicate();
      const std::uint64_t before = m_stats.bytesSent;
      Flush(now);
      cold.duplicateAckBytesSent += m_stats.bytesSent - before;
    }
    return false;
  }
  ++m_stats.packetsReceived;
  m_stats.bytesReceived += datagramSize;
  // A PING alone is a keepalive or a probe: acknowledge it at once, so the sender's PTO is
  // cancelled by the ACK instead of firing, and no delayed-ACK timer runs on a quiet connection.
  if (summary.ackEliciting && summary.onlyPing) {
    m_acks.RequestImmediateAck();
    // The peer's keepalive, with nothing of ours in flight: the quiet moment of a side that
    // only answers keepalives (its own keepalive never expires, so OnDeadlineTimer's release
    // never comes). The received ranges, and the sent-packet log, which a busy spell before
    // the quiet one may have grown (both a compare when there is nothing to give back): the
    // rest of its state does not grow while idle, and this runs once a round on every idle
    // connection. Only after a quiet spell from the peer too: PINGs that each skip a number
    // would otherwise give the room back and take it again at every datagram (three
    // allocations each); a keepalive comes a keepalive interval after the peer's last packet.
    if (m_phase == Phase::Established && !m_loss.HasAckElicitingInFlight() &&
        now - previousArrival >= QuietInterval()) {
      m_acks.ReleaseIdleMemory();
      m_loss.ReleaseIdleMemory();
    }
  }
  if (summary.ackEliciting && (m_phase == Phase::Established || m_phase == Phase::Closing)) {
    // The peer is talking to us: no need for a keepalive of our own, so on a quiet connection
    // only one side's keepalive timer fires.
    RestartKeepaliveTimer(now);
  }
  if (summary.ackEliciting && m_phase == Phase::Established) {
    m_peerTalked = true;
    // A side that only receives data (a one-way stream) sends nothing ack-eliciting, so it would
    // have no RTT samples: no PTO of its own but the initial one, and its answers to duplicates
    // paced at the initial RTT (a simulated bottleneck shared by two Bbr flows then took 1-2 s
    // longer to share fairly). Now and then its ACK carries a PING, which the peer acknowledges.
    // Not for a lone PING (a keepalive): its answer, an ACK, is acknowledged by the next one
    // (AfterDataPacket), and an idle connection's round stays two datagrams.
    if (!summary.onlyPing && now - m_loss.LastAckElicitingSent() > QuietInterval()) {
      m_pingPending = true;
    }
  }
  return true;
}

bool ConnectionCore::ApplyControlFrames(const DecodedPacket& packet, const FrameSummary& summary,
                                        Microseconds now, Microseconds& reachedPeerAt) {
  m_progress = false;
  // A recorded packet's only control frame is its ACK (STREAM and PING change nothing here).
  if (summary.recorded) return !summary.hasAck || ApplyAck(summary.frame.ack, now, reachedPeerAt);
  FrameReader reader(packet.frames, packet.framesSize);
  Frame frame;
  while (!reader.AtEnd() && reader.Next(frame) == DecodeStatus::Ok) {
    switch (frame.type) {
      case FrameType::Ack:
        if (!ApplyAck(frame.ack, now, reachedPeerAt)) return false;
        break;
      case FrameType::MaxData:
        if (frame.maxData > m_peerMaxData) {
          m_peerMaxData = frame.maxData;
          m_flowControlBlocked = false;
        }
        break;
      case FrameType::Close:
        if (frame.closeCode == CloseCode::Graceful) {
          // The peer sends CLOSE only once all it sent is acknowledged: what the application has
          // not read yet is all in the receive buffer. Our side now closes too, after sending
          // what it was already asked to send.
          m_acks.RequestImmediateAck();
          if (m_phase == Phase::Draining) break;
          // Everything the peer sent is acknowledged, so stored: a gap means it lied, and a
          // reader could be told ClosedByPeer while a message waits for bytes that never come.
          // The CLOSE is ignored (its packet is already recorded: counted, not undone).
          if (m_receiveBuffer && m_receiveBuffer->HighestReceived() != ContiguousReceived()) {
            ProtocolViolation();
            return false;
          }
          m_peerClosed = true;
          if (m_ourClose == OurClose::NotRequested) {
            m_ourClose = OurClose::AwaitingAcks;
            m_closeReason = EngineError::ClosedByPeer;
            m_phase = Phase::Closing;
          }
        } else {
          Terminate(frame.closeCode == CloseCode::Aborted ? EngineError::AbortedByPeer
                                                          : EngineError::ProtocolError);
          return false;
        }
        break;
      default:
        break;
    }
  }
  return true;
}

bool ConnectionCore::ApplyAck(const AckFrame& ack, Microseconds now, Microseconds& reachedPeerAt) {
  // Progress (m_progress, set by OnPacketAcked) is only a newly acknowledged ack-eliciting
  // packet of ours: acknowledging our ACK-only packets proves nothing a replay could not.
  if (m_phase != Phase::Draining &&
      m_loss.OnAckReceived(ack, now, *this) != LossRecovery::AckResult::Ok) {
    ProtocolViolation();
    return false;
  }
  if (m_phase == Phase::Closed) return false;
  reachedPeerAt = std::max(reachedPeerAt, ForgetAcknowledgedAckRanges(ack, now));
  return true;
}

void ConnectionCore::AfterDataPacket(Microseconds reachedPeerAt, Microseconds now) {
  if (m_progress && m_phase != Phase::Draining) {
    RestartIdleTimer(now, now);
  } else if (reachedPeerAt != 0 && m_phase == Phase::Established &&
             reachedPeerAt + IdleTimeout() > m_idleDeadline) {
    // The peer acknowledged a packet of ours that carried only an ACK: it heard from us when
    // that was sent. This is how the answering side of a keepalive (or the receiver of a
    // one-way stream), which sends nothing ack-eliciting, learns it is heard: the peer's next
    // PING carries the ACK. A keepalive round is then one PING and its ACK; it used to take a
    // PING of ours on that ACK, and the peer's ACK of it (issue 18: a third of an idle server's
    // datagrams, two thirds of those it received). Not while closing: our CLOSE must be
    // acknowledged itself.
    RestartIdleTimer(reachedPeerAt, now);
  }
  PumpSends();
  MaybeQueueClose();
  if (m_phase == Phase::Closing && m_ourClose == OurClose::Acknowledged && m_peerClosed) {
    BeginDraining(m_closeReason, now);  // both CLOSEs are through
  } else {
    PumpReceives();
  }
  if (m_phase == Phase::Closed) return;  // a protocol error while reading messages
  Flush(now);
}

void ConnectionCore::OnPacketAcked(const SentPacket& packet) {
  m_progress = true;
  // A packet with stream data was sent from m_sending, so it exists.
  if (packet.streamSize > 0) m_sending->buffer.OnAcked(packet.streamOffset, packet.streamSize);
  if (m_sending && m_sending->buffer.AckedPrefix() != m_sending->ackedPrefixSeen) {
    // The oldest waiting byte moved: the next one waits from now (RestartIdleTimer, which
    // this progress calls), if any waits.
    m_sending->ackedPrefixSeen = m_sending->buffer.AckedPrefix();
    m_sending->oldestDataSince = 0;
  }
  if (packet.hasClose) m_ourClose = OurClose::Acknowledged;
}

void ConnectionCore::OnPacketLost(const SentPacket& packet) {
  if (packet.streamSize > 0) m_sending->buffer.OnLost(packet.streamOffset, packet.streamSize);
  if (packet.hasMaxData) m_maxDataPending = true;  // sends the current limit, not the lost one
  if (packet.hasClose && m_ourClose != OurClose::Acknowledged) m_ourClose = OurClose::ToSend;
}

void ConnectionCore::ProtocolViolation() {
  ++m_context.stats.droppedProtocolViolation;
  if (++MakeCold().violations > kMaxViolations) {
    SendAbortPacket(CloseCode::ProtocolError);
    Terminate(EngineError::ProtocolError);
  }
}

// --- Timers ------------------------------------------------------------------------------------

void ConnectionCore::OnTimer(TimerKind kind, Microseconds now) {
  auto& armed = m_armedMs[QueueTimer(kind)];
  // An expiry detached for dispatch before the timer was cancelled or re-armed (another thread
  // may do that meanwhile) still runs: ignore it, the current arming speaks for itself.
  if (armed == 0 || now / 1000 + 1 < armed) return;
  armed = 0;
  if (QueueTimer(kind) == kDeadlineTimer) return OnDeadlineTimer(now);
  ++m_stats.timerFired[Index(kind)];
  switch (kind) {
    case TimerKind::LossDetection:
      if (m_phase == Phase::Connecting) {
        SendHandshakePacket(now);
      } else if (m_phase == Phase::Established || m_phase == Phase::Closing) {
        const auto deadline = m_loss.LossDetectionDeadline();
        if (deadline && *deadline <= now) {
          m_probesToSend = m_loss.OnLossDetectionTimeout(now, *this);
          if (m_probesToSend > 0) PrepareProbe();
        }
        Flush(now);
      }
      break;
    case TimerKind::Pacing:
      // Also the retry after an application call ran out of memory (RetrySoon): what it left
      // queued (cheap when nothing is), while the connection is open; once it has ended, its
      // end completes what was queued. A pump that fails again retries again.
      if (m_phase == Phase::Connecting || m_phase == Phase::Established ||
          m_phase == Phase::Closing) {
        AfterQueuing([&] {
          PumpSends();
          PumpReceives();
          MaybeQueueClose();  // a send whose completion the failure held may have been the last
        });
      }
      [[fallthrough]];
    case TimerKind::DelayedAck:
      if (m_phase != Phase::Connecting && m_phase != Phase::Closed) Flush(now);
      break;
    case TimerKind::Keepalive:
    case TimerKind::ConnectionDeadline:
      break;  // the deadline timer: OnDeadlineTimer, above
  }
}

void ConnectionCore::OnDeadlineTimer(Microseconds now) {
  // One queue timer serves the keepalive and the connection's deadline (ArmDeadlineTimer): both
  // may be due, either, or neither (the timer stayed armed early, or the maximum timeout clamped
  // it). The keepalive goes first: its PING may be what the deadline's liveness check waits for.
  if (m_keepaliveDeadline != 0 && now >= m_keepaliveDeadline) {
    m_keepaliveDeadline = 0;
    ++m_stats.timerFired[Index(TimerKind::Keepalive)];
    if (m_phase == Phase::Established || m_phase == Phase::Closing) {
      ReleaseIdleMemory();  // nothing was sent for a keepalive interval: a quiet moment
      DrawKeepaliveJitter();
      m_pingPending = true;
      Flush(now);  // sending the PING restarts the keepalive (RestartKeepaliveTimer)
    }
  }
  if (m_phase == Phase::Closed) return;
  if (now < ConnectionDeadline()) return ArmDeadlineTimer(now);
  ++m_stats.timerFired[Index(TimerKind::ConnectionDeadline)];
  // RFC 9001 6.5: three PTOs after an update, a packet reordered across it has arrived or
  // been declared lost (and its data resent under the new key): the old key can go.
  if (PreviousKeyDeadline() != 0 && now >= PreviousKeyDeadline()) {
    m_cold->previousKeyDeadline = 0;
    if (m_keys) m_keys->DiscardPreviousKey();
  }
  if (now < m_idleDeadline) {
    ArmDeadlineTimer(now);  // it was the previous key's deadline
  } else if (m_phase == Phase::Draining) {
    Terminate(m_endReason);
  } else if (MayProbeLiveness()) {
    // The peer talks to us but has not acknowledged anything of ours for an idle timeout.
    // Usually its next PING, carrying the ACK of our last answer, is a little late: the
    // idle timeout is two keepalive intervals, and our proof lags the peer's PINGs by one.
    // One PING, acknowledged at once, tells a live peer from a path that stopped carrying
    // our packets. The answer gets as long as a keepalive's (the PING-only flight's probe
    // delay), not a PTO, and then as long again for the probe that delay sends: an
    // overloaded peer answers late, and an overloaded receiver (ours) drops answers. With one
    // delay, the answer's loss was the connection's end: 1M connections on 2 cores lost 195
    // to 2,212 live ones a minute that way, in the minute after connecting, when the server's
    // socket overflowed (Perf/RESULTS.md, issue 18).
    m_livenessGraceUsed = true;
    m_idleDeadline = now + 2 * std::max(m_loss.ProbeTimeout(), KeepaliveInterval() / 4);
    m_pingPending = true;
    Flush(now);
    ArmDeadlineTimer(now);
  } else {
    Terminate(EngineError::TimedOut);
  }
}

void ConnectionCore::PrepareProbe() {
  // RFC 9002 6.2.4: a probe carries new data if there is some, else the oldest unacknowledged
  // data, else a PING. A CLOSE still unacknowledged goes along.
  if (m_ourClose == OurClose::InFlight) m_ourClose = OurClose::ToSend;
  SendBuffer::Range range;
  if (!NextToSend(1, range) && m_sending) m_sending->buffer.QueueOldestForProbe(m_sendDatagramSize);
}

void ConnectionCore::ArmTimer(TimerKind kind, Microseconds deadline, Microseconds now) {
  // Timers run in whole milliseconds on the queue's clock (Now() / 1000): aiming at the first
  // millisecond at or after the deadline means it never fires early.
  const Microseconds deadlineMs = (deadline + 999) / 1000;
  const Microseconds nowMs = now / 1000;
  // Capped before the conversion: a wait of 2^32 ms or more would wrap to a timer due at once.
  const Microseconds wait = deadlineMs > nowMs ? deadlineMs - nowMs : 0;
  const auto timeout =
      static_cast<Milliseconds>(std::min<Microseconds>(wait, m_context.maxTimerTimeout));
  const Microseconds key = nowMs + timeout + 1;  // 0 means "not armed"
  auto& armed = m_armedMs[QueueTimer(kind)];
  if (armed == key || m_phase == Phase::Closed) return;  // same millisecond, or timers gone
  TimerHandle& timer = m_timers[QueueTimer(kind)];
  if (timer.IsNull()) timer = m_context.timers.CreateTimer();
  m_context.timers.SetTimer(timer, m_context.timerSink, timeout,
                            PackTimerTarget(TimerTarget{m_slot, kind}));
  armed = key;
  ++m_stats.timerArmed[Index(kind)];
}

void ConnectionCore::RetrySoon() noexcept {
  // A pacing expiry already due pumps and flushes too: it is not put off.
  if (m_phase == Phase::Closed || m_armedMs[QueueTimer(TimerKind::Pacing)] != 0) return;
  try {
    const Microseconds now = m_context.io.Now();
    ArmTimer(TimerKind::Pacing, now + kAllocationRetry, now);
  } catch (const std::bad_alloc&) {
    // Not even the timer: the next event retries.
  }
}

Microseconds ConnectionCore::ForgetAcknowledgedAckRanges(const AckFrame& ack, Microseconds now) {
  bool any = false;
  PacketNumber largest = 0;
  std::uint32_t newestAge = std::numeric_limits<std::uint32_t>::max();  // ms
  for (std::size_t k = 0; k < m_sentAcks.size(); ++k) {
    const auto bit = static_cast<std::uint8_t>(1u << k);
    if ((m_sentAckPending & bit) == 0) continue;
    const SentAck& sentAck = m_sentAcks[k];
    for (std::size_t i = 0; i < ack.rangeCount; ++i) {    // ranges descend
      if (sentAck.packet > ack.ranges[i].largest) break;  // in a gap: not acknowledged
      if (sentAck.packet >= ack.ranges[i].smallest) {
        largest = any ? std::max(largest, sentAck.largest) : sentAck.largest;
        any = true;
        newestAge = std::min(newestAge, static_cast<std::uint32_t>(now / 1000) - m_sentAckMs[k]);
        m_sentAckPending = static_cast<std::uint8_t>(m_sentAckPending & ~bit);
        break;
      }
    }
  }
  if (!any) return 0;
  m_acks.OnAckAcknowledged(largest);
  return std::max<Microseconds>(now / 1000 * 1000 - Microseconds{newestAge} * 1000, 1);
}

bool ConnectionCore::MayProbeLiveness() const noexcept {
  // Once per proof; not while our data waits (a peer that talks but never acknowledges our data
  // is the slowloris the idle deadline's clamp ends), nor while closing.
  return m_phase == Phase::Established && m_peerTalked && !m_livenessGraceUsed &&
         AckedPrefix() == NextNewOffset();
}

bool ConnectionCore::DeadlineTimerMayStay(Microseconds deadline, Microseconds now) const {
  const Microseconds armedKey = m_armedMs[kDeadlineTimer];  // expiry ms + 1
  if (armedKey == 0 || deadline <= now) return false;
  const Microseconds armedExpiry = (armedKey - 1) * 1000;
  return armedExpiry <= deadline && deadline - armedExpiry <= (deadline - now) / 8;
}

void ConnectionCore::DestroyTimer(TimerKind kind) {
  TimerHandle& timer = m_timers[QueueTimer(kind)];
  if (timer.IsNull()) return;
  m_context.timers.DestroyTimer(timer);  // an expiry already detached is ignored (m_armedMs)
  m_armedMs[QueueTimer(kind)] = 0;
}

void ConnectionCore::CancelTimer(TimerKind kind) {
  auto& armed = m_armedMs[QueueTimer(kind)];
  if (armed == 0 || m_timers[QueueTimer(kind)].IsNull()) return;
  m_context.timers.CancelTimer(m_timers[QueueTimer(kind)]);
  armed = 0;
}

Microseconds ConnectionCore::IdleTimeout() const {
  Microseconds idle = Microseconds{m_context.options.idleTimeout} * 1000;
  if (m_peerIdleTimeoutMs > 0) {
    idle = std::min(idle, Microseconds{m_peerIdleTimeoutMs} * 1000);
  }
  // RFC 9000 10.1: never shorter than three PTOs, so a few losses cannot end a connection.
  return std::max(idle, 3 * m_loss.ProbeTimeout());
}

void ConnectionCore::RestartIdleTimer(Microseconds provenAt, Microseconds now) {
  m_idleDeadline = provenAt + IdleTimeout();
  m_livenessGraceUsed = false;
  // A proof from before now came in a packet the peer sent after it: the peer still talked since.
  if (provenAt == now) m_peerTalked = false;
  // Slowloris (RFC 9000 21.6): a peer that acknowledges our PINGs but never our data keeps
  // the connection "live" while its send buffer stays full. The oldest unacknowledged stream
  // byte must move within the idle timeout too.
  if (AckedPrefix() < NextNewOffset()) {  // then m_sending exists
    if (m_sending->oldestDataSince == 0) m_sending->oldestDataSince = now;
    m_idleDeadline = std::min(m_idleDeadline, m_sending->oldestDataSince + IdleTimeout());
  }
  ArmDeadlineTimer(now);
}

Microseconds ConnectionCore::ConnectionDeadline() const noexcept {
  return PreviousKeyDeadline() != 0 ? std::min(m_idleDeadline, PreviousKeyDeadline())
                                    : m_idleDeadline;
}

void ConnectionCore::ArmDeadlineTimer(Microseconds now) {
  Microseconds deadline = ConnectionDeadline();
  TimerKind reason = TimerKind::ConnectionDeadline;
  if (m_keepaliveDeadline != 0 && m_keepaliveDeadline < deadline) {
    deadline = m_keepaliveDeadline;
    reason = TimerKind::Keepalive;
  }
  if (DeadlineTimerMayStay(deadline, now)) return;
  ArmTimer(reason, deadline, now);  // the same queue timer either way; counted for `reason`
}

void ConnectionCore::AfterKeyUse(Microseconds now) {
  if (!m_keys->TakePhaseChange()) return;
  // A later update before the deadline restarts it: the key it keeps is the newer one.
  MakeCold().previousKeyDeadline = now + 3 * m_loss.ProbeTimeout();
  ArmDeadlineTimer(now);
}

Microseconds ConnectionCore::KeepaliveInterval() const {
  return std::min<Microseconds>(Microseconds{m_context.options.keepaliveInterval} * 1000,
                                IdleTimeout() / 2);
}

Microseconds ConnectionCore::NextKeepaliveDeadline(Microseconds now) const {
  Microseconds interval = KeepaliveInterval();
  // A server waits half as long again: its clients' PINGs (which restart its keepalive) keep a
  // quiet connection alive, so the side with thousands of connections sends and fires almost
  // none.
  if (m_role == Role::Server) interval += interval / 2;
  return now + interval - m_keepaliveShortening;
}

void ConnectionCore::RestartKeepaliveTimer(Microseconds now) {
  m_keepaliveDeadline = NextKeepaliveDeadline(now);
  ArmDeadlineTimer(now);
}

void ConnectionCore::DrawKeepaliveJitter() {
  // Connections opened together would keep their keepalive rounds in step for ever, and a
  // round of 100k PINGs and answers within a second overflows a receiver (issue 18). Each round
  // is a 32nd to a 32nd plus an eighth shorter, drawn afresh per round (not per re-arm, so that
  // the re-arms of one millisecond still cost one timer operation). The 32nd is the answering
  // side's slack: it learns it is heard from the PING after next, so two rounds must take less
  // than its idle timeout (twice the interval) by more than a PING's lateness; with no floor,
  // two rounds of almost no jitter left none, and its liveness PING at the idle deadline
  // (OnTimer) was all that kept the connection. (A million idle connections on two cores draw
  // 25-40 of those a second with or without the floor: there the PINGs come late, by more than
  // the floor.) xorshift64: no quality needed, only spread.
  m_jitterState ^= m_jitterState << 13;
  m_jitterState ^= m_jitterState >> 7;
  m_jitterState ^= m_jitterState << 17;
  const Microseconds interval = KeepaliveInterval();
  m_keepaliveShortening = interval / 32 + interval * (m_jitterState & 1023) / 8192;
}

void ConnectionCore::UpdateLossTimer(Microseconds now) {
  const auto deadline = m_loss.LossDetectionDeadline();
  if (deadline) {
    ArmTimer(TimerKind::LossDetection, *deadline, now);
  } else if (!m_loss.HasController()) {
    // Nothing in flight, and nothing but PINGs ever sent: the timer's record goes back to the
    // queue. An idle connection needs this timer only while its keepalive PING is in flight, so
    // the queue holds two timers per idle connection (keepalive and deadline), not three.
    DestroyTimer(TimerKind::LossDetection);
  } else {
    // A connection that carries data keeps it: armed per packet, cancelled per ACK, the
    // insurance-timer pattern the wheel makes O(1).
    CancelTimer(TimerKind::LossDetection);
  }
}

void ConnectionCore::UpdateAckTimer(Microseconds now) {
  const auto deadline = m_acks.AckDeadline();
  if (deadline) {
    ArmTimer(TimerKind::DelayedAck, *deadline, now);
  } else {
    CancelTimer(TimerKind::DelayedAck);
  }
}

// --- Sending -----------------------------------------------------------------------------------

bool ConnectionCore::HasAckElicitingToSend() const {
  return m_pingPending || HasMoreThanPingToSend();
}

bool ConnectionCore::HasMoreThanPingToSend() const {
  if (m_maxDataPending || m_ourClose == OurClose::ToSend) return true;
  SendBuffer::Range range;
  return NextToSend(1, range);
}

void ConnectionCore::Flush(Microseconds now) {
  if (m_phase == Phase::Connecting || m_phase == Phase::Closed) return;
  try {
    SendPackets(now);
  } catch (const std::bad_alloc&) {
    // Out of memory part way (a packet's recording, the pacing timer): the packets that went
    // before are recorded and in flight, and their loss timer must run, or nothing would resend
    // them if they were lost and no event came.
    if (m_phase != Phase::Closed) UpdateLossTimer(now);
    throw;
  }
  if (m_sending && NextNewOffset() < m_sending->buffer.AppendedEnd() &&
      NextNewOffset() >= m_peerMaxData && !m_flowControlBlocked) {
    m_flowControlBlocked = true;
    ++m_sending->flowControlStalls;
  }
  if (m_phase == Phase::Closed) return;
  UpdateLossTimer(now);
  UpdateAckTimer(now);
}

void ConnectionCore::SendPackets(Microseconds now) {
  const auto ackDeadline = m_acks.AckDeadline();
  bool ackWanted = m_acks.AckNow() || (ackDeadline && *ackDeadline <= now);
  // Bounded so that one call cannot monopolise the endpoint; pacing and the window bound it
  // long before this in practice.
  for (int packets = 0; packets < 256; ++packets) {
    const bool probe = m_probesToSend > 0;
    const bool haveData = m_phase != Phase::Draining && HasAckElicitingToSend();
    PacketMode mode = probe ? PacketMode::Probe : PacketMode::Normal;
    if (!probe && haveData) {
      if (!m_loss.CanSend(m_sendDatagramSize)) {
        mode = PacketMode::AckOnly;
      } else {
        const Microseconds next = m_loss.NextSendTime(now);
        if (next > now) {
          ArmTimer(TimerKind::Pacing, next, now);
          mode = PacketMode::AckOnly;
        }
      }
    } else if (!probe) {
      mode = PacketMode::AckOnly;
      m_loss.OnApplicationLimited();  // nothing to send: rate samples now measure the application
    }
    if (mode == PacketMode::AckOnly) {
      if (ackWanted && m_acks.HasAnythingToAck()) SendDataPacket(now, PacketMode::AckOnly);
      return;
    }
    SendDataPacket(now, mode);
    ackWanted = false;
    if (probe) --m_probesToSend;
  }
}

void ConnectionCore::SendDataPacket(Microseconds now, PacketMode mode) {
  // What recording the packet will need, before anything goes into it: from here on nothing
  // fails, so the stream data it takes is always either still queued or recorded for
  // retransmission. (The datagram itself may be dropped, like a loss: EndpointContext::Send.)
  if (mode != PacketMode::AckOnly) m_loss.PrepareToSend(HasMoreThanPingToSend());
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), m_sendDatagramSize);
  SentPacket sent;
  sent.packetNumber = m_packetNumbers.Current();
  sent.timeSent = now;
  DataSealer sealer(m_keys.get(), sent.packetNumber);
  if (m_keys) {
    writer.BeginSecureData(m_peerId, sent.packetNumber, m_keys->PrepareSend(), sealer);
    AfterKeyUse(now);
  } else {
    writer.BeginData(m_peerId, sent.packetNumber);
  }

  if (m_acks.HasAnythingToAck()) {
    AckFrame ack;
    if (m_acks.BuildAck(now, ack) &&
        writer.AppendAck(ack.ranges.data(), ack.rangeCount, ack.ackDelayMicroseconds)) {
      m_acks.OnAckSent();
      m_sentAcks[m_nextSentAck] = SentAck{sent.packetNumber, ack.largest};
      m_sentAckMs[m_nextSentAck] = static_cast<std::uint32_t>(now / 1000);
      m_sentAckPending = static_cast<std::uint8_t>(m_sentAckPending | (1u << m_nextSentAck));
      m_nextSentAck = static_cast<std::uint8_t>((m_nextSentAck + 1) % m_sentAcks.size());
    }
  }
  bool ackEliciting = false;
  if (mode != PacketMode::AckOnly) {
    if (m_ourClose == OurClose::ToSend && writer.AppendClose(CloseCode::Graceful)) {
      m_ourClose = OurClose::InFlight;
      sent.hasClose = true;
      ackEliciting = true;
    }
    if (m_maxDataPending && writer.AppendMaxData(ReceiveLimit())) {
      m_maxDataPending = false;
      m_advertisedMaxData = ReceiveLimit();
      sent.hasMaxData = true;
      ackEliciting = true;
    }
    SendBuffer::Range range;
    if (writer.Remaining() > kStreamFrameOverhead &&
        NextToSend(writer.Remaining() - kStreamFrameOverhead, range)) {
      std::size_t written = 0;
      if (std::uint8_t* bytes = writer.AppendStreamHeader(range.offset, range.size, &written)) {
        m_sending->buffer.Read(range.offset, written, bytes);  // straight into the datagram
        m_sending->buffer.OnSent(range.offset, written);
        // Nothing was waiting before.
        if (m_sending->oldestDataSince == 0) m_sending->oldestDataSince = now;
        sent.streamOffset = range.offset;
        sent.streamSize = static_cast<std::uint32_t>(written);
        ackEliciting = true;
        if (range.retransmission) {
          m_sending->streamBytesRetransmitted += written;
          ++m_sending->packetsRetransmitted;
        } else {
          m_sending->streamBytesSent += written;
        }
      }
    }
    if (!ackEliciting && (mode == PacketMode::Probe || m_pingPending) && writer.AppendPing()) {
      ackEliciting = true;
      sent.pingOnly = true;
    }
    if (ackEliciting) m_pingPending = false;  // any ack-eliciting packet does a PING's job
  }
  if (writer.FramesSize() == 0) return;  // nothing to say after all

  m_packetNumbers.Advance();
  sent.size = static_cast<std::uint32_t>(Transmit(writer));
  sent.ackEliciting = ackEliciting;
  m_loss.OnPacketSent(sent);
  if (ackEliciting) RestartKeepaliveTimer(now);
}

void ConnectionCore::SendAbortPacket(CloseCode code) {
  if (m_peerId == 0 || m_phase == Phase::Connecting || m_phase == Phase::Closed) return;
  // Sent once, unreliably (like QUIC's CONNECTION_CLOSE): the state is gone right after.
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), m_sendDatagramSize);
  DataSealer sealer(m_keys.get(), m_packetNumbers.Current());
  if (m_keys) {
    writer.BeginSecureData(m_peerId, m_packetNumbers.Current(), m_keys->PrepareSend(), sealer);
  } else {
    writer.BeginData(m_peerId, m_packetNumbers.Current());
  }
  m_packetNumbers.Advance();
  writer.AppendClose(code);
  Transmit(writer);
}

std::size_t ConnectionCore::Transmit(PacketWriter& writer) {
  // So that a peer that lost this connection can answer any packet with a smaller Reset.
  writer.PadTo(kMinDataPacketSize);
  const std::size_t size = m_context.Send(m_remote, writer);
  ++m_stats.packetsSent;
  m_stats.bytesSent += size;
  return size;
}

// --- Application -------------------------------------------------------------------------------

void ConnectionCore::Complete(Completion& handler, EngineError error) {
  m_context.io.Post(handler, error);
}

void ConnectionCore::Send(const std::uint8_t* data, std::size_t size, SendHandler& handler,
                          Microseconds now) {
  if (!IsOpen()) {
    Complete(handler, m_endReason != EngineError::None ? m_endReason : m_closeReason);
    return;
  }
  if (size > m_context.options.maxMessageSize || size > m_peerMaxMessageSize) {
    Complete(handler, EngineError::MessageTooLarge);
    return;
  }
  VectorQueue<PendingSend>& pending = MakeSending().pending;
  pending.MakeRoomForOneTight();  // may throw, having taken nothing
  pending.Push(PendingSend{data, size, 0, false, std::move(handler)});  // room made: cannot throw
  AfterQueuing([&] {
    PumpSends();
    Flush(now);
  });
}

void ConnectionCore::PumpSends() {
  if (!m_sending) return;
  SendBuffer& buffer = m_sending->buffer;
  VectorQueue<PendingSend>& pending = m_sending->pending;
  while (!pending.Empty()) {
    PendingSend& send = pending.Front();
    if (!send.done) {
      if (!send.prefixWritten) {
        std::uint8_t prefix[8];
        const std::size_t prefixSize = EncodeVarInt(send.size, prefix);  // message framing
        if (buffer.FreeSpace() < prefixSize) break;
        buffer.AppendWhole(prefix, prefixSize);
        send.prefixWritten = true;
      }
      send.copied += buffer.Append(send.data + send.copied, send.size - send.copied);
      if (send.copied < send.size) break;  // the rest goes in as acknowledgements free space
      ++m_sending->messagesSent;
      send.done = true;
    }
    Complete(send.handler, EngineError::None);
    pending.Pop();
  }
}

void ConnectionCore::Receive(std::vector<std::uint8_t>& message, ReceiveHandler& handler) {
  m_pendingReceives.MakeRoomForOneTight();  // may throw, having taken nothing
  m_pendingReceives.Push(PendingReceive{&message, std::move(handler)});  // cannot throw
  m_receivesAbandoned = false;
  AfterQueuing([&] {
    PumpReceives();
    if (m_maxDataPending) Flush(m_context.io.Now());
  });
}

void ConnectionCore::PumpReceives() {
  if (m_receivesAbandoned) {
    // Nobody can read these any more; consuming them keeps the peer's window open.
    while (m_receiveBuffer && m_receiveBuffer->ReadMessage(m_context.discarded) ==
                                  ReceiveBuffer::ReadResult::Message) {
    }
  }
  const bool deliverBuffered = m_endReason == EngineError::None ||
                               m_endReason == EngineError::ClosedByPeer ||
                               m_endReason == EngineError::ClosedLocally;
  while (!m_pendingReceives.Empty()) {
    PendingReceive& receive = m_pendingReceives.Front();
    if (receive.done) {  // read out already; its completion's post failed
      Complete(receive.handler, receive.result);
      m_pendingReceives.Pop();
      continue;
    }
    auto result = ReceiveBuffer::ReadResult::NeedMore;
    if (deliverBuffered && m_receiveBuffer) result = m_receiveBuffer->ReadMessage(*receive.message);
    if (result == ReceiveBuffer::ReadResult::MessageTooLarge) {
      if (m_phase != Phase::Closed) {
        // The peer ignored the maximum message size we advertised: the stream cannot go on.
        ++m_context.stats.droppedProtocolViolation;
        SendAbortPacket(CloseCode::ProtocolError);
        // Fails this receive and the others through a nested PumpReceives, which may move the
        // queue's items (VectorQueue compacts): `receive` is not used after it.
        Terminate(EngineError::ProtocolError);
        return;
      }
      result = ReceiveBuffer::ReadResult::NeedMore;
    }
    if (result == ReceiveBuffer::ReadResult::Message) {
      ++m_stats.messagesReceived;
    } else if (m_endReason == EngineError::None && !m_peerClosed) {
      break;  // more may come
    }
    receive.done = true;
    receive.result = result == ReceiveBuffer::ReadResult::Message ? EngineError::None
                     : m_endReason != EngineError::None           ? m_endReason
                                                                  : m_closeReason;
    Complete(receive.handler, receive.result);
    m_pendingReceives.Pop();
  }
  MaybeUpdateMaxData();
}

void ConnectionCore::MaybeUpdateMaxData() {
  if (m_phase != Phase::Established && m_phase != Phase::Closing) return;
  const std::uint64_t limit = ReceiveLimit();
  if (limit <= m_advertisedMaxData) return;
  // Advertise again once the application has read a quarter of the window (often enough that a
  // streaming sender is never stalled by a stale limit, rarely enough to cost nothing), or at
  // once when the peer has reached the advertised limit: it may be in the middle of a message
  // we can only deliver, and so free room for, once the rest of it arrives.
  const std::uint64_t highestReceived = m_receiveBuffer ? m_receiveBuffer->HighestReceived() : 0;
  const bool peerAtLimit = highestReceived + m_sendDatagramSize >= m_advertisedMaxData;
  if (limit - m_advertisedMaxData >= m_context.options.receiveWindow / 4 || peerAtLimit) {
    m_maxDataPending = true;
  }
}

void ConnectionCore::AbandonReceives() {
  m_receivesAbandoned = true;
  while (!m_pendingReceives.Empty()) {  // each leaves once posted: a failed post leaves the rest
    PendingReceive& receive = m_pendingReceives.Front();
    Complete(receive.handler, receive.done ? receive.result : EngineError::OperationAborted);
    m_pendingReceives.Pop();
  }
}

void ConnectionCore::ReleaseIdleMemory() {
  // Vectors keep their high-water capacity so that a busy connection allocates nothing; a
  // connection quiet for a keepalive interval gives back what it no longer uses.
  m_pendingReceives.ReleaseMemoryIfEmpty();
  m_acks.ReleaseIdleMemory();
  m_loss.ReleaseIdleMemory();
  if (m_sending) {
    m_sending->pending.ReleaseMemoryIfEmpty();
    m_sending->buffer.ReleaseIdleMemory();
  }
  if (m_receiveBuffer) m_receiveBuffer->ReleaseIdleMemory();
}

void ConnectionCore::WaitClosed(CloseHandler& handler) {
  if (m_endReason != EngineError::None) {
    Complete(handler, m_endReason);
  } else {
    std::vector<CloseHandler>& waiters = MakeCold().closeWaiters;
    MakeRoomForOneTight(waiters);           // may throw, having taken nothing
    waiters.push_back(std::move(handler));  // room made: cannot throw
  }
}

void ConnectionCore::Close(Microseconds now) {
  if (!IsOpen()) return;
  m_ourClose = OurClose::AwaitingAcks;
  m_closeReason = EngineError::ClosedLocally;
  if (m_phase == Phase::Connecting) {
    Terminate(m_closeReason);
    return;
  }
  m_phase = Phase::Closing;
  MaybeQueueClose();
  Flush(now);
}

void ConnectionCore::MaybeQueueClose() {
  // The CLOSE goes only once every byte sent before Close() is acknowledged: that is what makes
  // the close graceful, and why the peer may treat the CLOSE as "you have everything".
  if (m_phase == Phase::Closing && m_ourClose == OurClose::AwaitingAcks &&
      (!m_sending || (m_sending->pending.Empty() && m_sending->buffer.AllAcked()))) {
    m_ourClose = OurClose::ToSend;
  }
}

void ConnectionCore::Abort(Microseconds) {
  if (m_phase == Phase::Closed) return;
  if (m_phase != Phase::Draining) SendAbortPacket(CloseCode::Aborted);
  Terminate(EngineError::Aborted);
}

void ConnectionCore::Shutdown(EngineError reason) {
  if (m_phase != Phase::Closed) Terminate(reason);
}

// --- Ending ------------------------------------------------------------------------------------

void ConnectionCore::CompletePendingOperations() {
  // Each operation leaves its queue once its completion is posted: a post that fails (no
  // memory) leaves the rest, and the next call posts them.
  if (m_sending) {
    VectorQueue<PendingSend>& pending = m_sending->pending;
    while (!pending.Empty()) {
      Complete(pending.Front().handler, pending.Front().done ? EngineError::None : m_endReason);
      pending.Pop();
    }
  }
  PumpReceives();  // buffered messages after a graceful close; the reason for the rest
  if (m_cold) {
    auto& waiters = m_cold->closeWaiters;
    while (!waiters.empty()) {
      Complete(waiters.front(), m_endReason);
      waiters.erase(waiters.begin());
    }
  }
}

void ConnectionCore::BeginDraining(EngineError reason, Microseconds now) {
  if (m_endReason == EngineError::None) m_endReason = reason;
  m_phase = Phase::Draining;
  CompletePendingOperations();
  m_loss.DiscardAll();
  m_probesToSend = 0;
  m_pingPending = m_maxDataPending = false;  // draining sends ACKs only (our CLOSE included)
  CancelTimer(TimerKind::LossDetection);
  CancelTimer(TimerKind::Pacing);
  m_keepaliveDeadline = 0;
  // Stay to acknowledge a CLOSE the peer sends again because our ACK was lost.
  m_idleDeadline = now + 3 * m_loss.ProbeTimeout();
  ArmDeadlineTimer(now);
}

void ConnectionCore::Terminate(EngineError reason) {
  if (m_endReason == EngineError::None) m_endReason = reason;
  m_phase = Phase::Closed;
  m_terminationUnfinished = true;
  FinishTermination();
}

void ConnectionCore::FinishTermination() {
  // Every step can run again: a post that fails (no memory) stops this part way, and the
  // endpoint's HandleEvents calls it again after the connection's next event (its timers are
  // still armed then) or at shutdown. The phase is Closed by then: nothing else would.
  CompletePendingOperations();
  m_loss.DiscardAll();
  for (auto& timer : m_timers) {
    if (!timer.IsNull()) m_context.timers.DestroyTimer(timer);
  }
  m_armedMs.fill(0);
  m_events.finished = true;
  m_terminationUnfinished = false;
}

ConnectionStatistics ConnectionCore::GetStatistics() const {
  ConnectionStatistics stats;
  const auto& loss = m_loss.Statistics();
  stats.smoothedRttMicroseconds = loss.smoothedRtt;
  stats.rttVariationMicroseconds = loss.rttVariation;
  stats.minRttMicroseconds = loss.minRtt;
  stats.latestRttMicroseconds = loss.latestRtt;
  stats.congestionWindow = loss.congestionWindow;
  stats.bytesInFlight = loss.bytesInFlight;
  stats.congestionEvents = loss.congestionEvents;
  stats.persistentCongestion = loss.persistentCongestion;
  stats.packetsLost = loss.packetsLost;
  stats.spuriousRetransmits = loss.spuriousLosses;
  stats.probeTimeouts = loss.probeTimeouts;
  stats.packetsSent = m_stats.packetsSent;
  stats.packetsReceived = m_stats.packetsReceived;
  stats.bytesSent = m_stats.bytesSent;
  stats.bytesReceived = m_stats.bytesReceived;
  stats.messagesReceived = m_stats.messagesReceived;
  if (m_sending) {
    stats.messagesSent = m_sending->messagesSent;
    stats.streamBytesSent = m_sending->streamBytesSent;
    stats.streamBytesRetransmitted = m_sending->streamBytesRetransmitted;
    stats.packetsRetransmitted = m_sending->packetsRetransmitted;
    stats.flowControlStalls = m_sending->flowControlStalls;
  }
  if (m_cold) stats.duplicatePacketsReceived = m_cold->duplicatePacketsReceived;
  stats.ackRecordsVisited = m_loss.RecordsVisited();
  stats.sentPacketRecordRoom = m_loss.RecordCapacity();
  stats.encrypted = m_keys != nullptr;
  stats.aes256Gcm = m_keys != nullptr && m_keys->Algorithm() == AeadAlgorithm::Aes256Gcm;
  stats.keyUpdates = KeyPhase();
  for (unsigned kind = 0; kind < kTimerKindCount; ++kind) {
    stats.timerArmed[kind] = m_stats.timerArmed[kind];
    stats.timerFired[kind] = m_stats.timerFired[kind];
  }
  const CongestionStatistics& model = m_loss.CongestionControllerStatistics();
  stats.bandwidthEstimate = model.bandwidthEstimate;
  stats.modelMinRttMicroseconds = model.minRttEstimate;
  stats.congestiveLossRounds = model.congestiveLossRounds;
  stats.standingQueueRounds = model.standingQueueRounds;
  stats.startupExitsOnDelay = model.slowStartExitsOnDelay;
  for (unsigned phase = 0; phase < kCongestionPhaseCount; ++phase) {
    stats.phaseMicroseconds[phase] = model.phaseMicroseconds[phase];
  }
  return stats;
}

}  // namespace timerwheel::rudp::detail
