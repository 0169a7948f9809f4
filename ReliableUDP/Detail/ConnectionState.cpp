// The protocol engine of one connection (see ConnectionState.h for the lifecycle and timers).
#include "ReliableUDP/Detail/ConnectionState.h"

#include <algorithm>
#include <boost/asio/error.hpp>
#include <utility>

#include "ReliableUDP/Error.h"

namespace timerwheel::rudp::detail {
namespace {

constexpr unsigned Index(TimerKind kind) { return static_cast<unsigned>(kind); }

// A peer that keeps sending packets that break the protocol (ACKs of unsent packets, data beyond
// the window) is disconnected; a few are dropped and counted, since without cryptography a
// forged packet must not be able to kill a connection by itself.
constexpr unsigned kMaxViolations = 100;

// Room for a STREAM frame's type, offset and length fields.
constexpr std::size_t kStreamFrameOverhead = 1 + 8 + 4;

boost::system::error_code Code(Error error) { return make_error_code(error); }

}  // namespace

ConnectionState::ConnectionState(EndpointContext& context, Role role, ConnectionId localId,
                                 const Udp::endpoint& remote, UserData userDataBase)
    : m_context(context),
      m_role(role),
      m_localId(localId),
      m_remote(remote),
      m_userDataBase(userDataBase),
      m_sendBuffer(context.pool, context.options.sendBufferSize),
      m_loss(LossRecoveryOptions{context.options.maxDatagramSize,
                                 context.options.congestionControl == CongestionControl::NewReno,
                                 context.options.pacing}),
      m_sendDatagramSize(context.options.maxDatagramSize),
      m_peerMaxMessageSize(context.options.maxMessageSize),
      m_receiveBuffer(context.pool, context.options.receiveWindow, context.options.maxMessageSize),
      m_acks(static_cast<Microseconds>(context.options.maxAckDelay) * 1000) {}

ConnectionState::~ConnectionState() {
  // Terminate destroys the timers; this covers a connection dropped before it ever ran.
  for (auto& timer : m_timers) {
    if (!timer.IsNull()) m_context.timers.DestroyTimer(timer);
  }
}

ConnectionState::Events ConnectionState::TakeEvents() noexcept {
  return std::exchange(m_events, Events{});
}

// --- Handshake ---------------------------------------------------------------------------------

TransportParameters ConnectionState::OwnParameters() const {
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

void ConnectionState::StartClient(Microseconds now) {
  SendHandshakePacket(now);
  m_idleDeadline = now + Microseconds{m_context.options.handshakeTimeout} * 1000;
  ArmTimer(TimerKind::Idle, m_idleDeadline, now);
}

void ConnectionState::SendHandshakePacket(Microseconds now) {
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), buffer.size());
  if (m_haveCookie) {
    writer.BeginHelloWithCookie(m_localId, m_cookie, OwnParameters());
  } else {
    writer.BeginHello(m_localId);
  }
  const std::size_t size = writer.Finish();
  m_context.Send(m_remote, buffer.data(), size);
  ++m_stats.packetsSent;
  m_stats.bytesSent += size;
  // RFC 6298: 1 s before any RTT sample, doubling on each retransmission.
  const unsigned backoff = std::min(m_handshakeAttempts, kMaxPtoBackoff);
  ++m_handshakeAttempts;
  ArmTimer(TimerKind::LossDetection, now + (kInitialPto << backoff), now);
}

void ConnectionState::OnCookie(const PacketHeader& header, Microseconds now) {
  if (m_role != Role::Client || m_phase != Phase::Connecting) {
    ++m_context.stats.droppedUnexpected;
    return;
  }
  m_cookie = header.cookie;
  m_haveCookie = true;
  m_handshakeAttempts = 0;
  SendHandshakePacket(now);
}

void ConnectionState::OnWelcome(const PacketHeader& header, Microseconds now) {
  if (m_role != Role::Client || m_phase != Phase::Connecting) {
    ++m_context.stats.droppedUnexpected;  // e.g. a repeated Welcome
    return;
  }
  m_peerId = header.source;
  EnterEstablished(header.parameters, now);
  m_events.established = true;
}

void ConnectionState::StartServer(ConnectionId peerId, const TransportParameters& peer,
                                  Microseconds now) {
  m_peerId = peerId;
  SendWelcome();
  EnterEstablished(peer, now);
}

void ConnectionState::OnRepeatedHelloWithCookie(Microseconds) {
  if (m_phase == Phase::Established || m_phase == Phase::Closing) SendWelcome();
}

void ConnectionState::SendWelcome() {
  // Smaller than the 1200-byte HelloWithCookie it answers: never an amplifier.
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), buffer.size());
  writer.BeginWelcome(m_peerId, m_localId, OwnParameters());
  const std::size_t size = writer.Finish();
  m_context.Send(m_remote, buffer.data(), size);
  ++m_stats.packetsSent;
  m_stats.bytesSent += size;
}

void ConnectionState::EnterEstablished(const TransportParameters& peer, Microseconds now) {
  m_peerIdleTimeoutMs = peer.idleTimeoutMs;
  m_sendDatagramSize = static_cast<std::size_t>(
      std::min<std::uint64_t>(m_context.options.maxDatagramSize, peer.maxDatagramSize));
  m_peerMaxMessageSize = peer.maxMessageSize;
  m_peerMaxData = peer.initialMaxData;
  m_advertisedMaxData = m_receiveBuffer.Limit();
  m_loss.SetPeerMaxAckDelay(peer.maxAckDelayMs * 1000);
  m_phase = Phase::Established;
  CancelTimer(TimerKind::LossDetection);
  RestartIdleTimer(now);
  RestartKeepaliveTimer(now);
}

// --- Receiving ---------------------------------------------------------------------------------

void ConnectionState::OnDataPacket(const DecodedPacket& packet, std::size_t datagramSize,
                                   Microseconds now) {
  if (m_phase == Phase::Connecting || m_phase == Phase::Closed) {
    // A client has no peer ID before the Welcome; the server will send again.
    ++m_context.stats.droppedUnexpected;
    return;
  }

  // Pass 1: validate every frame before anything changes, so a malformed or forged packet is
  // dropped whole.
  bool ackEliciting = false;
  bool onlyPing = true;
  {
    FrameReader reader(packet.frames, packet.framesSize);
    Frame frame;
    while (!reader.AtEnd()) {
      if (reader.Next(frame) != DecodeStatus::Ok) {
        ++m_context.stats.droppedMalformed;
        return;
      }
      switch (frame.type) {
        case FrameType::Ack:
          if (frame.ack.largest >= m_nextPacketNumber) {  // an ACK of a packet never sent
            ProtocolViolation();
            return;
          }
          break;
        case FrameType::Stream:
          if (frame.stream.offset + frame.stream.length > m_receiveBuffer.Limit()) {
            ProtocolViolation();  // beyond the window we advertised
            return;
          }
          ackEliciting = true;
          onlyPing = false;
          break;
        case FrameType::Ping:
          ackEliciting = true;
          break;
        case FrameType::MaxData:
        case FrameType::Close:
          ackEliciting = true;
          onlyPing = false;
          break;
        case FrameType::Padding:
          break;
      }
    }
  }

  // Pass 2: stream data, before the packet is recorded as received: if it cannot be stored the
  // packet must not be acknowledged, or the peer would never send it again.
  {
    FrameReader reader(packet.frames, packet.framesSize);
    Frame frame;
    while (!reader.AtEnd() && reader.Next(frame) == DecodeStatus::Ok) {
      if (frame.type != FrameType::Stream || m_phase == Phase::Draining) continue;
      const auto result =
          m_receiveBuffer.Insert(frame.stream.offset, frame.stream.data, frame.stream.length);
      if (result == ReceiveBuffer::InsertResult::TooFragmented) {
        ++m_context.stats.droppedTooFragmented;
        return;
      }
      if (result == ReceiveBuffer::InsertResult::BeyondWindow) {
        ProtocolViolation();
        return;
      }
    }
  }

  if (!m_acks.OnPacketReceived(packet.header.packetNumber, ackEliciting, now)) {
    ++m_stats.duplicatePacketsReceived;      // a duplicate or a replay: its data, if any, is known
    if (ackEliciting) m_acks.OnDuplicate();  // our ACK may have been lost: send another
    Flush(now);
    return;
  }
  ++m_stats.packetsReceived;
  m_stats.bytesReceived += datagramSize;
  // A PING alone is a keepalive or a probe: acknowledge it at once, so the sender's PTO is
  // cancelled by the ACK instead of firing, and no delayed-ACK timer runs on a quiet connection.
  if (ackEliciting && onlyPing) m_acks.RequestImmediateAck();
  if (ackEliciting && (m_phase == Phase::Established || m_phase == Phase::Closing)) {
    // The peer is talking to us: no need for a keepalive of our own, so on a quiet connection
    // only one side's keepalive timer fires.
    RestartKeepaliveTimer(now);
    // But our liveness needs the peer to acknowledge something of ours, and an ACK-only reply is
    // acknowledged only in the peer's next packet, a keepalive interval later. So a lone PING
    // after a quiet spell is answered with ACK + PING, which the peer acknowledges at once. (A
    // side that has just sent a PING does not answer one: no ping-pong.)
    const Microseconds quiet = Microseconds{m_context.options.keepaliveInterval} * 1000 / 2;
    if (onlyPing && now - m_lastAckElicitingSent > quiet) m_pingPending = true;
  }

  // Pass 3: everything else.
  m_progress = false;
  FrameReader reader(packet.frames, packet.framesSize);
  Frame frame;
  while (!reader.AtEnd() && reader.Next(frame) == DecodeStatus::Ok) {
    switch (frame.type) {
      case FrameType::Ack:
        if (!m_peerAckedAnything || frame.ack.largest > m_peerLargestAcked) {
          // The peer got a packet newer than any it acknowledged before (ACK-only ones count):
          // both directions work.
          m_peerAckedAnything = true;
          m_peerLargestAcked = frame.ack.largest;
          m_progress = true;
        }
        if (m_phase != Phase::Draining &&
            m_loss.OnAckReceived(frame.ack, now, *this) != LossRecovery::AckResult::Ok) {
          ProtocolViolation();
          return;
        }
        if (m_phase == Phase::Closed) return;
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
          m_peerClosed = true;
          if (!m_closeRequested) {
            m_closeRequested = true;
            m_closeReason = Code(Error::ClosedByPeer);
            m_phase = Phase::Closing;
          }
        } else {
          Terminate(Code(frame.closeCode == CloseCode::Aborted ? Error::AbortedByPeer
                                                               : Error::ProtocolError));
          return;
        }
        break;
      default:
        break;
    }
  }

  if (m_progress && m_phase != Phase::Draining) RestartIdleTimer(now);
  PumpSends();
  MaybeQueueClose();
  if (m_phase == Phase::Closing && m_closeAcked && m_peerClosed) {
    BeginDraining(m_closeReason, now);  // both CLOSEs are through
  } else {
    PumpReceives();
  }
  if (m_phase == Phase::Closed) return;  // a protocol error while reading messages
  Flush(now);
}

void ConnectionState::OnPacketAcked(const SentPacket& packet) {
  m_progress = true;
  if (packet.streamSize > 0) m_sendBuffer.OnAcked(packet.streamOffset, packet.streamSize);
  if (packet.hasClose) m_closeAcked = true;
}

void ConnectionState::OnPacketLost(const SentPacket& packet) {
  if (packet.streamSize > 0) m_sendBuffer.OnLost(packet.streamOffset, packet.streamSize);
  if (packet.hasMaxData) m_maxDataPending = true;  // sends the current limit, not the lost one
  if (packet.hasClose && !m_closeAcked) {
    m_closeInFlight = false;
    m_closePending = true;
  }
}

void ConnectionState::ProtocolViolation() {
  ++m_context.stats.droppedProtocolViolation;
  if (++m_violations > kMaxViolations) {
    SendAbortPacket(CloseCode::ProtocolError);
    Terminate(Code(Error::ProtocolError));
  }
}

// --- Timers ------------------------------------------------------------------------------------

void ConnectionState::OnTimer(TimerKind kind, Microseconds now) {
  auto& armed = m_armedMs[Index(kind)];
  // An expiry detached for dispatch before the timer was cancelled or re-armed (another thread
  // may do that meanwhile) still runs: ignore it, the current arming speaks for itself.
  if (armed == 0 || now / 1000 + 1 < armed) return;
  armed = 0;
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
    case TimerKind::DelayedAck:
    case TimerKind::Pacing:
      if (m_phase != Phase::Connecting && m_phase != Phase::Closed) Flush(now);
      break;
    case TimerKind::Keepalive:
      if (m_phase == Phase::Established || m_phase == Phase::Closing) {
        ReleaseIdleMemory();  // nothing was sent for a keepalive interval: a quiet moment
        m_pingPending = true;
        Flush(now);
      }
      break;
    case TimerKind::Idle:
      if (now < m_idleDeadline) {
        ArmTimer(TimerKind::Idle, m_idleDeadline, now);  // was clamped to the maximum timeout
      } else if (m_phase == Phase::Draining) {
        Terminate(m_endReason);
      } else if (m_phase != Phase::Closed) {
        Terminate(Code(Error::TimedOut));
      }
      break;
  }
}

void ConnectionState::PrepareProbe() {
  // RFC 9002 6.2.4: a probe carries new data if there is some, else the oldest unacknowledged
  // data, else a PING. A CLOSE still unacknowledged goes along.
  if (m_closeInFlight && !m_closeAcked) m_closePending = true;
  SendBuffer::Range range;
  if (!m_sendBuffer.NextToSend(1, m_peerMaxData, range)) {
    m_sendBuffer.QueueOldestForProbe(m_sendDatagramSize);
  }
}

void ConnectionState::ArmTimer(TimerKind kind, Microseconds deadline, Microseconds now) {
  // Timers run in whole milliseconds on the queue's clock (Now() / 1000): aiming at the first
  // millisecond at or after the deadline means it never fires early.
  const Microseconds deadlineMs = (deadline + 999) / 1000;
  const Microseconds nowMs = now / 1000;
  Milliseconds timeout = deadlineMs > nowMs ? static_cast<Milliseconds>(deadlineMs - nowMs) : 0;
  timeout = std::min(timeout, m_context.timers.GetMaximumTimeout());
  const Microseconds key = nowMs + timeout + 1;  // 0 means "not armed"
  auto& armed = m_armedMs[Index(kind)];
  if (armed == key || m_phase == Phase::Closed) return;  // same millisecond, or timers gone
  TimerHandle& timer = m_timers[Index(kind)];
  if (timer.IsNull()) timer = m_context.timers.CreateTimer();
  m_context.timers.SetTimer(timer, m_context.timerSink, timeout, m_userDataBase | Index(kind));
  armed = key;
  ++m_stats.timerArmed[Index(kind)];
}

void ConnectionState::CancelTimer(TimerKind kind) {
  auto& armed = m_armedMs[Index(kind)];
  if (armed == 0 || m_timers[Index(kind)].IsNull()) return;
  m_context.timers.CancelTimer(m_timers[Index(kind)]);
  armed = 0;
}

Microseconds ConnectionState::IdleTimeout() const {
  Microseconds idle = Microseconds{m_context.options.idleTimeout} * 1000;
  if (m_peerIdleTimeoutMs > 0) {
    idle = std::min(idle, Microseconds{m_peerIdleTimeoutMs} * 1000);
  }
  // RFC 9000 10.1: never shorter than three PTOs, so a few losses cannot end a connection.
  return std::max(idle, 3 * m_loss.ProbeTimeout());
}

void ConnectionState::RestartIdleTimer(Microseconds now) {
  m_idleDeadline = now + IdleTimeout();
  ArmTimer(TimerKind::Idle, m_idleDeadline, now);
}

void ConnectionState::RestartKeepaliveTimer(Microseconds now) {
  Microseconds interval = std::min<Microseconds>(
      Microseconds{m_context.options.keepaliveInterval} * 1000, IdleTimeout() / 2);
  // A server waits half as long again: its clients' PINGs (which re-arm this timer) keep a quiet
  // connection alive, so the side with thousands of connections sends and fires almost none.
  if (m_role == Role::Server) interval += interval / 2;
  ArmTimer(TimerKind::Keepalive, now + interval, now);
}

void ConnectionState::UpdateLossTimer(Microseconds now) {
  const auto deadline = m_loss.LossDetectionDeadline();
  if (deadline) {
    ArmTimer(TimerKind::LossDetection, *deadline, now);
  } else {
    CancelTimer(TimerKind::LossDetection);
  }
}

void ConnectionState::UpdateAckTimer(Microseconds now) {
  const auto deadline = m_acks.AckDeadline();
  if (deadline) {
    ArmTimer(TimerKind::DelayedAck, *deadline, now);
  } else {
    CancelTimer(TimerKind::DelayedAck);
  }
}

// --- Sending -----------------------------------------------------------------------------------

bool ConnectionState::HasAckElicitingToSend() const {
  if (m_pingPending || m_maxDataPending || m_closePending) return true;
  SendBuffer::Range range;
  return m_sendBuffer.NextToSend(1, m_peerMaxData, range);
}

void ConnectionState::Flush(Microseconds now) {
  if (m_phase == Phase::Connecting || m_phase == Phase::Closed) return;
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
    }
    if (mode == PacketMode::AckOnly) {
      if (ackWanted && m_acks.HasAnythingToAck()) SendDataPacket(now, PacketMode::AckOnly);
      break;
    }
    SendDataPacket(now, mode);
    ackWanted = false;
    if (probe) --m_probesToSend;
  }
  if (m_sendBuffer.NextNewOffset() < m_sendBuffer.AppendedEnd() &&
      m_sendBuffer.NextNewOffset() >= m_peerMaxData && !m_flowControlBlocked) {
    m_flowControlBlocked = true;
    ++m_stats.flowControlStalls;
  }
  if (m_phase == Phase::Closed) return;
  UpdateLossTimer(now);
  UpdateAckTimer(now);
}

void ConnectionState::SendDataPacket(Microseconds now, PacketMode mode) {
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), m_sendDatagramSize);
  SentPacket sent;
  sent.packetNumber = m_nextPacketNumber;
  sent.timeSent = now;
  writer.BeginData(m_peerId, sent.packetNumber);

  if (m_acks.HasAnythingToAck()) {
    AckFrame ack;
    if (m_acks.BuildAck(now, ack) &&
        writer.AppendAck(ack.ranges.data(), ack.rangeCount, ack.ackDelayMicroseconds)) {
      m_acks.OnAckSent();
    }
  }
  bool ackEliciting = false;
  if (mode != PacketMode::AckOnly) {
    if (m_closePending && writer.AppendClose(CloseCode::Graceful)) {
      m_closePending = false;
      m_closeInFlight = true;
      sent.hasClose = true;
      ackEliciting = true;
    }
    if (m_maxDataPending && writer.AppendMaxData(m_receiveBuffer.Limit())) {
      m_maxDataPending = false;
      m_advertisedMaxData = m_receiveBuffer.Limit();
      sent.hasMaxData = true;
      ackEliciting = true;
    }
    SendBuffer::Range range;
    if (writer.Remaining() > kStreamFrameOverhead &&
        m_sendBuffer.NextToSend(writer.Remaining() - kStreamFrameOverhead, m_peerMaxData, range)) {
      std::size_t written = 0;
      if (std::uint8_t* bytes = writer.AppendStreamHeader(range.offset, range.size, &written)) {
        m_sendBuffer.Read(range.offset, written, bytes);  // straight into the datagram
        m_sendBuffer.OnSent(range.offset, written);
        sent.streamOffset = range.offset;
        sent.streamSize = static_cast<std::uint32_t>(written);
        ackEliciting = true;
        if (range.retransmission) {
          m_stats.streamBytesRetransmitted += written;
          ++m_stats.packetsRetransmitted;
        } else {
          m_stats.streamBytesSent += written;
        }
      }
    }
    if (!ackEliciting && (mode == PacketMode::Probe || m_pingPending) && writer.AppendPing()) {
      ackEliciting = true;
    }
    if (ackEliciting) m_pingPending = false;  // any ack-eliciting packet does a PING's job
  }
  if (writer.FramesSize() == 0) return;  // nothing to say after all

  ++m_nextPacketNumber;
  const std::size_t size = writer.Finish();
  sent.size = static_cast<std::uint32_t>(size);
  sent.ackEliciting = ackEliciting;
  sent.inFlight = ackEliciting;
  m_context.Send(m_remote, buffer.data(), size);
  m_loss.OnPacketSent(sent);
  ++m_stats.packetsSent;
  m_stats.bytesSent += size;
  if (ackEliciting) {
    m_lastAckElicitingSent = now;
    RestartKeepaliveTimer(now);
  }
}

void ConnectionState::SendAbortPacket(CloseCode code) {
  if (m_peerId == 0 || m_phase == Phase::Connecting || m_phase == Phase::Closed) return;
  // Sent once, unreliably (like QUIC's CONNECTION_CLOSE): the state is gone right after.
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), m_sendDatagramSize);
  writer.BeginData(m_peerId, m_nextPacketNumber++);
  writer.AppendClose(code);
  const std::size_t size = writer.Finish();
  m_context.Send(m_remote, buffer.data(), size);
  ++m_stats.packetsSent;
  m_stats.bytesSent += size;
}

// --- Application -------------------------------------------------------------------------------

void ConnectionState::Complete(UniqueFunction<void(boost::system::error_code)>& handler,
                               boost::system::error_code error) {
  m_context.io.Post(std::move(handler), error);
}

void ConnectionState::Send(const std::uint8_t* data, std::size_t size, SendHandler handler,
                           Microseconds now) {
  if (m_endReason || m_closeRequested) {
    Complete(handler, m_endReason ? m_endReason : m_closeReason);
    return;
  }
  if (size > m_context.options.maxMessageSize || size > m_peerMaxMessageSize) {
    Complete(handler, Code(Error::MessageTooLarge));
    return;
  }
  m_pendingSends.push_back(PendingSend{data, size, 0, false, std::move(handler)});
  PumpSends();
  Flush(now);
}

void ConnectionState::PumpSends() {
  while (m_sendsHead < m_pendingSends.size()) {
    PendingSend& send = m_pendingSends[m_sendsHead];
    if (!send.prefixWritten) {
      std::uint8_t prefix[8];
      const std::size_t prefixSize = EncodeVarInt(send.size, prefix);  // message framing
      if (m_sendBuffer.FreeSpace() < prefixSize) break;
      m_sendBuffer.Append(prefix, prefixSize);
      send.prefixWritten = true;
    }
    send.copied += m_sendBuffer.Append(send.data + send.copied, send.size - send.copied);
    if (send.copied < send.size) break;  // the rest goes in as acknowledgements free space
    ++m_stats.messagesSent;
    Complete(send.handler, {});
    ++m_sendsHead;
  }
  if (m_sendsHead == m_pendingSends.size()) {
    m_pendingSends.clear();  // keeps its capacity
    m_sendsHead = 0;
  }
}

void ConnectionState::Receive(std::vector<std::uint8_t>& message, ReceiveHandler handler,
                              Microseconds now) {
  m_receivesAbandoned = false;
  m_pendingReceives.push_back(PendingReceive{&message, std::move(handler)});
  PumpReceives();
  if (m_maxDataPending) Flush(now);
}

void ConnectionState::PumpReceives() {
  if (m_receivesAbandoned) {
    // Nobody can read these any more; consuming them keeps the peer's window open.
    while (m_receiveBuffer.ReadMessage(m_context.discarded) == ReceiveBuffer::ReadResult::Message) {
    }
  }
  const bool deliverBuffered = !m_endReason || m_endReason == Code(Error::ClosedByPeer) ||
                               m_endReason == Code(Error::ClosedLocally);
  while (m_receivesHead < m_pendingReceives.size()) {
    PendingReceive& receive = m_pendingReceives[m_receivesHead];
    auto result = ReceiveBuffer::ReadResult::NeedMore;
    if (deliverBuffered) result = m_receiveBuffer.ReadMessage(*receive.message);
    if (result == ReceiveBuffer::ReadResult::MessageTooLarge) {
      if (m_phase != Phase::Closed) {
        // The peer ignored the maximum message size we advertised: the stream cannot go on.
        ++m_context.stats.droppedProtocolViolation;
        SendAbortPacket(CloseCode::ProtocolError);
        Terminate(Code(Error::ProtocolError));  // fails this receive and the others
        return;
      }
      result = ReceiveBuffer::ReadResult::NeedMore;
    }
    if (result == ReceiveBuffer::ReadResult::Message) {
      ++m_stats.messagesReceived;
    } else if (!m_endReason && !m_peerClosed) {
      break;  // more may come
    }
    Complete(receive.handler, result == ReceiveBuffer::ReadResult::Message
                                  ? boost::system::error_code{}
                              : m_endReason ? m_endReason
                                            : m_closeReason);
    ++m_receivesHead;
  }
  if (m_receivesHead == m_pendingReceives.size()) {
    m_pendingReceives.clear();
    m_receivesHead = 0;
  }
  MaybeUpdateMaxData();
}

void ConnectionState::MaybeUpdateMaxData() {
  if (m_phase != Phase::Established && m_phase != Phase::Closing) return;
  const std::uint64_t limit = m_receiveBuffer.Limit();
  if (limit <= m_advertisedMaxData) return;
  // Advertise again once the application has read a quarter of the window (often enough that a
  // streaming sender is never stalled by a stale limit, rarely enough to cost nothing), or at
  // once when the peer has reached the advertised limit: it may be in the middle of a message
  // we can only deliver, and so free room for, once the rest of it arrives.
  const bool peerAtLimit =
      m_receiveBuffer.HighestReceived() + m_sendDatagramSize >= m_advertisedMaxData;
  if (limit - m_advertisedMaxData >= m_context.options.receiveWindow / 4 || peerAtLimit) {
    m_maxDataPending = true;
  }
}

void ConnectionState::AbandonReceives() {
  for (std::size_t i = m_receivesHead; i < m_pendingReceives.size(); ++i) {
    Complete(m_pendingReceives[i].handler, boost::asio::error::operation_aborted);
  }
  m_pendingReceives.clear();
  m_receivesHead = 0;
  m_receivesAbandoned = true;
}

void ConnectionState::ReleaseIdleMemory() {
  // Vectors keep their high-water capacity so that a busy connection allocates nothing; a
  // connection quiet for a keepalive interval gives back what it no longer uses.
  if (m_sendsHead == m_pendingSends.size()) {
    m_pendingSends.clear();
    m_pendingSends.shrink_to_fit();
    m_sendsHead = 0;
  }
  if (m_receivesHead == m_pendingReceives.size()) {
    m_pendingReceives.clear();
    m_pendingReceives.shrink_to_fit();
    m_receivesHead = 0;
  }
  m_sendBuffer.ReleaseIdleMemory();
  m_receiveBuffer.ReleaseIdleMemory();
}

void ConnectionState::WaitClosed(CloseHandler handler) {
  if (m_endReason) {
    Complete(handler, m_endReason);
  } else {
    m_closeWaiters.push_back(std::move(handler));
  }
}

void ConnectionState::Close(Microseconds now) {
  if (m_closeRequested || m_endReason || m_phase == Phase::Closed) return;
  m_closeRequested = true;
  m_closeReason = Code(Error::ClosedLocally);
  if (m_phase == Phase::Connecting) {
    Terminate(m_closeReason);
    return;
  }
  m_phase = Phase::Closing;
  MaybeQueueClose();
  Flush(now);
}

void ConnectionState::MaybeQueueClose() {
  // The CLOSE goes only once every byte sent before Close() is acknowledged: that is what makes
  // the close graceful, and why the peer may treat the CLOSE as "you have everything".
  if (m_phase == Phase::Closing && m_closeRequested && !m_closeInFlight && !m_closePending &&
      !m_closeAcked && m_sendsHead == m_pendingSends.size() && m_sendBuffer.AllAcked()) {
    m_closePending = true;
  }
}

void ConnectionState::Abort(Microseconds) {
  if (m_phase == Phase::Closed) return;
  if (m_phase != Phase::Draining) SendAbortPacket(CloseCode::Aborted);
  Terminate(Code(Error::Aborted));
}

void ConnectionState::Shutdown(boost::system::error_code reason) {
  if (m_phase != Phase::Closed) Terminate(reason);
}

// --- Ending ------------------------------------------------------------------------------------

void ConnectionState::CompletePendingOperations() {
  for (std::size_t i = m_sendsHead; i < m_pendingSends.size(); ++i) {
    Complete(m_pendingSends[i].handler, m_endReason);
  }
  m_pendingSends.clear();
  m_sendsHead = 0;
  PumpReceives();  // buffered messages after a graceful close; the reason for the rest
  for (auto& waiter : m_closeWaiters) Complete(waiter, m_endReason);
  m_closeWaiters.clear();
}

void ConnectionState::BeginDraining(boost::system::error_code reason, Microseconds now) {
  if (!m_endReason) m_endReason = reason;
  m_phase = Phase::Draining;
  CompletePendingOperations();
  m_loss.DiscardAll();
  m_probesToSend = 0;
  m_pingPending = m_maxDataPending = m_closePending = false;
  CancelTimer(TimerKind::LossDetection);
  CancelTimer(TimerKind::Pacing);
  CancelTimer(TimerKind::Keepalive);
  // Stay to acknowledge a CLOSE the peer sends again because our ACK was lost.
  m_idleDeadline = now + 3 * m_loss.ProbeTimeout();
  ArmTimer(TimerKind::Idle, m_idleDeadline, now);
}

void ConnectionState::Terminate(boost::system::error_code reason) {
  if (!m_endReason) m_endReason = reason;
  m_phase = Phase::Closed;
  CompletePendingOperations();
  m_loss.DiscardAll();
  for (auto& timer : m_timers) {
    if (!timer.IsNull()) m_context.timers.DestroyTimer(timer);
  }
  m_armedMs.fill(0);
  m_events.finished = true;
}

ConnectionStatistics ConnectionState::GetStatistics() const {
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
  stats.messagesSent = m_stats.messagesSent;
  stats.messagesReceived = m_stats.messagesReceived;
  stats.streamBytesSent = m_stats.streamBytesSent;
  stats.streamBytesRetransmitted = m_stats.streamBytesRetransmitted;
  stats.packetsRetransmitted = m_stats.packetsRetransmitted;
  stats.duplicatePacketsReceived = m_stats.duplicatePacketsReceived;
  stats.flowControlStalls = m_stats.flowControlStalls;
  for (unsigned kind = 0; kind < kTimerKindCount; ++kind) {
    stats.timerArmed[kind] = m_stats.timerArmed[kind];
    stats.timerFired[kind] = m_stats.timerFired[kind];
  }
  return stats;
}

}  // namespace timerwheel::rudp::detail
