// The sans-I/O endpoint (see EndpointCore.h for its thread-safety rules).
#include "ReliableUDP/Detail/EndpointCore.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <new>
#include <stdexcept>
#include <utility>

#include "ReliableUDP/Detail/Sharding.h"
#include "ReliableUDP/Detail/ShrinkCapacity.h"
#include "ReliableUDP/Detail/Wipe.h"

namespace timerwheel::rudp::detail {
namespace {

// Each retired keyed handshake is a connection accepted within one cookie lifetime (two windows
// and a second), and every accept takes a token of the newConnectionsPerSecond bucket (which
// holds one second's burst): this many entries are never exceeded. Without a rate limit, the
// connection limit sizes it instead.
std::size_t RetiredHandshakeCapacity(const EndpointOptions& options) noexcept {
  constexpr std::size_t kFloor = 1024;
  const std::size_t seconds = (2 * static_cast<std::size_t>(options.cookieWindow) + 999) / 1000 + 2;
  const std::size_t rate = options.newConnectionsPerSecond;
  if (rate == 0) return (std::max)(options.maxConnections, kFloor);
  if (rate > SIZE_MAX / seconds) return SIZE_MAX;
  return (std::max)(rate * seconds, kFloor);
}

}  // namespace

EndpointCore::EndpointCore(IEndpointIo& io, ITimerQueue& timers, Milliseconds timerGranularity,
                           const EndpointOptions& options, ITimer* timerSink, ShardRole shard)
    : m_io(io),
      m_shard(shard),
      m_context(io, timers, timerSink != nullptr ? *timerSink : *this, timerGranularity, options),
      m_cookies(RandomSipHashKey(), RandomSipHashKey(), Microseconds{options.cookieWindow} * 1000),
      m_ownAdmission(shard.admission != nullptr ? nullptr
                                                : std::make_unique<AdmissionControl>(options)),
      m_admission(shard.admission != nullptr ? *shard.admission : *m_ownAdmission),
      m_statelessReplies(options.statelessRepliesPerSecond),
      m_keyExchanges(options),
      m_byResetToken(MakePeerKeyedMap<std::uint64_t, std::uint32_t>()),
      m_byHandshake(MakePeerKeyedMap<HandshakeKey, std::uint32_t>()),
      m_retiredHandshakes(RetiredHandshakeCapacity(options)),
      m_retiredHandshakeHashKey(RandomSipHashKey()) {}

EndpointCore::~EndpointCore() { Shutdown(); }

// --- Datagrams ---------------------------------------------------------------------------------

void EndpointCore::OnDatagram(const Address& from, const std::uint8_t* data, std::size_t size,
                              Microseconds now) {
  try {
    HandleDatagram(from, data, size, now);
  } catch (const std::bad_alloc&) {
    // Dropped, as a datagram the network lost: the peer's retransmission or retry comes later.
    // Thrown on, it would stop the socket's receive path for every datagram after it.
    ++m_context.stats.droppedOutOfMemory;
  }
}

void EndpointCore::HandleDatagram(const Address& from, const std::uint8_t* data, std::size_t size,
                                  Microseconds now) {
  if (m_shutDown) return;
  auto& stats = m_context.stats;
  ++stats.datagramsReceived;
  stats.bytesReceived += size;
  if (from.port == 0) {
    // Nothing can be sent to port 0 (the send fails: EINVAL on Linux), so the source is spoofed
    // and no answer (Cookie, Refusal, Reset) could reach it. Dropped before anything else: every
    // path into the engine (the socket's, the simulated network's) comes through here.
    ++stats.droppedSourcePortZero;
    return;
  }
  if (size > m_context.options.maxDatagramSize) {
    // No peer of ours sends one (each sends at most the smaller of both maxDatagramSizes, and a
    // Hello is exactly kHelloSize): not worth a parse, nor a checksum over 64 KB.
    ++stats.droppedOversize;
    return;
  }

  DecodedPacket packet;
  const DecodeStatus status = DecodePacket(data, size, packet);
  if (status != DecodeStatus::Ok) {
    if (status == DecodeStatus::BadChecksum) {
      ++stats.droppedBadChecksum;
    } else {
      ++stats.droppedMalformed;
    }
    return;
  }
  const PacketHeader& header = packet.header;
  if (header.type == PacketType::Hello) return OnHello(from, header);
  if (header.type == PacketType::HelloWithCookie) return OnHelloWithCookie(from, header);
  if (header.type == PacketType::SecureHelloWithCookie) {
    return OnSecureHelloWithCookie(from, packet, data, size);
  }
  if (header.type == PacketType::Reset) return OnReset(from, header);

  const std::uint32_t slot = m_byId.Find(header.destination);
  if (slot == ConnectionIdTable::kNotFound) {
    ++stats.droppedUnknownConnection;
    // A peer still sending to a connection we no longer have (aborted, or lost in a restart):
    // tell it, so that it ends now instead of after its idle timeout.
    if (header.type == PacketType::Data || IsSecureData(header.type)) {
      SendStatelessReset(from, header.destination, size, now);
    }
    return;
  }
  // A reference, not a copy (two atomic operations per datagram): the slot keeps the connection
  // until HandleEvents, below, retires it; nothing before that drops it.
  ConnectionCore& connection = *m_slots[slot].connection;
  if (connection.Remote() != from) {
    // No migration: a known ID from another address is an off-path guess or a rebinding.
    ++stats.droppedWrongAddress;
    return;
  }
  // An idle server fires no timer of its own and gets no handshake, the two other places that
  // expire handshake entries: without this they would stay for good (about 73 B a connection).
  if (m_handshakeExpiryHead < m_handshakeExpiries.size() &&
      m_handshakeExpiries[m_handshakeExpiryHead].at <= now) {
    ExpireHandshakeEntries(now);
  }
  switch (header.type) {
    case PacketType::Cookie:
      connection.OnCookie(header, now);
      break;
    case PacketType::Welcome:
      if (!ParametersAreValid(header.parameters)) {
        ++stats.droppedMalformed;
        return;
      }
      connection.OnWelcome(header, now);
      RegisterResetToken(slot);
      break;
    case PacketType::SecureWelcome:
      if (connection.OnSecureWelcome(packet, data, size, now)) RegisterResetToken(slot);
      break;
    case PacketType::Refusal:
      connection.OnRefusal();
      break;
    case PacketType::AuthRefusal:
      connection.OnAuthRefusal();
      break;
    case PacketType::Data:
      connection.OnDataPacket(packet, size, now);
      break;
    case PacketType::SecureData:
    case PacketType::SecureDataPhase1:
      connection.OnSecureDataPacket(packet, data, size, now);
      break;
    default:
      ++stats.droppedUnexpected;
      break;
  }
  HandleEvents(slot);
}

void EndpointCore::OnHello(const Address& from, const PacketHeader& header) {
  auto& stats = m_context.stats;
  if (!m_context.options.acceptIncoming) {
    ++stats.droppedNotAccepting;
    return;
  }
  if (header.source == 0) {
    ++stats.droppedMalformed;
    return;
  }
  const Microseconds now = m_io.Now();
  if (!Admits(from, now)) return SendRefusal(from, header.source, now);  // within one round trip
  // Stateless: the cookie is all the server remembers, and it is in the client's hands. The
  // reply (37 bytes) is far smaller than the 1200-byte Hello, so spoofed Hellos amplify nothing.
  const auto cookie =
      m_cookies.Mint(from.bytes.data(), from.ByteCount(), from.port, header.source, now);
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), buffer.size());
  writer.BeginCookie(header.source, cookie);
  m_context.Send(from, writer);
  ++stats.cookiesSent;
}

void EndpointCore::OnHelloWithCookie(const Address& from, const PacketHeader& header) {
  auto& stats = m_context.stats;
  if (!m_context.options.acceptIncoming) {
    ++stats.droppedNotAccepting;
    return;
  }
  const Microseconds now = m_io.Now();
  if (!CookieHolds(from, header, now)) return;
  if (m_context.hasServerKey) {
    // This server accepts only encrypted connections: the client must pin its key.
    ++stats.droppedUnprotected;
    return SendAuthRefusal(from, header.source, now);
  }
  if (!ParametersAreValid(header.parameters)) {
    ++stats.droppedMalformed;
    return;
  }
  if (!MayAccept(from, header.source, now)) return;
  OpenServerConnection(from, header.source, header.resetToken, now, /*keyed=*/false,
                       [&](ConnectionCore& connection) {
                         connection.StartServer(header.source, header.parameters, header.resetToken,
                                                now);
                       });
}

bool EndpointCore::CookieHolds(const Address& from, const PacketHeader& header, Microseconds now) {
  // Verified every time, a repeat for a live connection too: otherwise anyone who knows (or
  // guesses) a client's address and connection ID draws a Welcome without ever having seen a
  // cookie. The check is a SipHash, far cheaper than the Welcome it guards.
  m_retiredHandshakes.Expire(now);  // a comparison unless one is due
  if (header.source == 0 || !m_cookies.Verify(header.cookie, from.bytes.data(), from.ByteCount(),
                                              from.port, header.source, now)) {
    ++m_context.stats.droppedBadCookie;
    return false;
  }
  ExpireHandshakeEntries(now);
  const auto existing = m_byHandshake.find(HandshakeKey{from, header.source});
  if (existing != m_byHandshake.end()) {
    // The client did not get our Welcome and tried again: same connection, Welcome again.
    m_slots[existing->second].connection->OnRepeatedHelloWithCookie(now);
    return false;
  }
  return true;
}

bool EndpointCore::MayAccept(const Address& from, ConnectionId clientId, Microseconds now) {
  if (m_acceptQueue.size() - m_acceptQueueEnded >= m_context.options.acceptBacklog) {
    ++m_context.stats.droppedBacklogFull;  // the client retries; it may get in once there is room
    return false;
  }
  if (!Admits(from, now)) {
    SendRefusal(from, clientId, now);
    return false;
  }
  return true;
}

void EndpointCore::OnSecureHelloWithCookie(const Address& from, const DecodedPacket& packet,
                                           const std::uint8_t* data, std::size_t size) {
  auto& stats = m_context.stats;
  if (!m_context.options.acceptIncoming) {
    ++stats.droppedNotAccepting;
    return;
  }
  const Microseconds now = m_io.Now();
  const PacketHeader& header = packet.header;
  if (!CookieHolds(from, header, now)) return;
  if (!m_context.hasServerKey) {
    // A plaintext server: the client pinned a key we cannot prove we hold.
    return SendAuthRefusal(from, header.source, now);
  }
  // A connection that already ended was made from this very handshake: whoever sends it again
  // replays what they saw. (While the connection lives, CookieHolds answers a repeat.)
  if (m_retiredHandshakes.Contains(RetiredHandshakeKey(from, header.source))) {
    ++stats.droppedReplayedHandshake;
    return;
  }
  // Full only without a connection rate limit (see RetiredHandshakeCapacity): then refused
  // until entries expire, rather than forget one and let its replay in.
  if (m_retiredHandshakes.Full()) return SendRefusal(from, header.source, now);
  if (!MayAccept(from, header.source, now)) return;
  // The same cookie may come again and again (no connection is made for a handshake that fails
  // to open, so nothing remembers it): each costs a key exchange, hence the budget, and the
  // shares of it that one address and one prefix may take (else one host replaying one cookie
  // spent all of it, and every honest keyed handshake was refused).
  const KeyExchangeBudget::Verdict keyExchange = m_keyExchanges.TryTake(from, now);
  if (keyExchange != KeyExchangeBudget::Verdict::Granted) {
    if (keyExchange != KeyExchangeBudget::Verdict::BudgetSpent) {
      ++stats.refusedOverKeyExchangeShare;
    }
    return SendRefusal(from, header.source, now);
  }

  // The client's half of the key exchange (Noise NK's "e, es"): only a holder of our secret
  // key derives the hello key, so a client that pinned another key is told at once, and a
  // tampered handshake opens nowhere. All of it before anything is allocated.
  KeySchedule schedule(m_context.serverKey.publicKey);
  schedule.MixHash(header.ephemeral.data(), header.ephemeral.size());
  X25519Key shared{};
  // Wiped on every way out: the returns below (a junk handshake's DH result is still a secret of
  // ours) and an exception out of the open.
  const WipeAtScopeExit wipeShared(shared);
  if (!X25519(m_context.serverKey.secretKey, header.ephemeral, shared)) {
    ++stats.droppedAuthenticationFailed;  // a small-order key: no client makes one
    return;
  }
  schedule.MixKey(shared);
  std::uint8_t* opened = m_context.opened.data();
  std::copy(data, data + size, opened);
  std::size_t plaintextSize = 0;
  const PacketProtection hello(AeadAlgorithm::ChaCha20Poly1305, schedule.MessageKey("hello"));
  if (!hello.Open(0, opened, packet.authenticatedSize, packet.authenticatedSize + packet.framesSize,
                  plaintextSize)) {
    ++stats.droppedAuthenticationFailed;
    return SendAuthRefusal(from, header.source, now);
  }
  TransportParameters parameters;
  ResetToken resetToken{};
  std::uint8_t flags = 0;
  const std::uint8_t* clientToken = nullptr;  // in `opened`, which the accept below leaves alone
  std::size_t clientTokenSize = 0;
  if (!DecodeHandshakePayload(opened + packet.authenticatedSize, plaintextSize, parameters,
                              resetToken, flags, &clientToken, &clientTokenSize) ||
      !ParametersAreValid(parameters)) {
    ++stats.droppedMalformed;
    return;
  }

  // Our half ("e, ee"): a fresh ephemeral key for every connection (forward secrecy).
  const X25519KeyPair ephemeral = GenerateX25519KeyPair();
  schedule.MixHash(ephemeral.publicKey.data(), ephemeral.publicKey.size());
  if (!X25519(ephemeral.secretKey, header.ephemeral, shared)) return;  // checked above
  schedule.MixKey(shared);
  const bool aes = (flags & kHandshakeFlagAes256Gcm) != 0 && m_context.aes256GcmAvailable;
  ConnectionCore::SecureStart start;
  start.ephemeralPublic = ephemeral.publicKey;
  start.welcomeKey = schedule.MessageKey("welcome");
  start.secrets = schedule.Split();
  start.algorithm = aes ? AeadAlgorithm::Aes256Gcm : AeadAlgorithm::ChaCha20Poly1305;
  // `ephemeral` and `start` wipe themselves as they go (X25519KeyPair, PacketKey, TrafficSecrets).

  OpenServerConnection(from, header.source, resetToken, now, /*keyed=*/true,
                       [&](ConnectionCore& connection) {
                         connection.StartSecureServer(header.source, parameters, resetToken, start,
                                                      clientToken, clientTokenSize, now);
                       });
}

template <class Start>
void EndpointCore::OpenServerConnection(const Address& from, ConnectionId clientId,
                                        const ResetToken& resetToken, Microseconds now, bool keyed,
                                        Start&& start) {
  OpenSteps steps;
  try {
    const auto connection = AcceptConnection(from, clientId, resetToken, now, steps);
    if (keyed) {
      m_retiredHandshakes.Reserve();
      steps.retiredRoom = true;
    }
    start(*connection);
    HandOverAccepted(connection);
  } catch (...) {
    UndoOpen(steps, from);  // a Welcome already sent is answered as after a restart: a Reset
    throw;
  }
  ++m_context.stats.connectionsAccepted;
  HandleEvents(steps.slot);
}

std::shared_ptr<ConnectionCore> EndpointCore::AcceptConnection(const Address& from,
                                                               ConnectionId clientId,
                                                               const ResetToken& resetToken,
                                                               Microseconds now, OpenSteps& steps) {
  OpenSlot(ConnectionCore::Role::Server, from, steps);
  const std::uint32_t slot = steps.slot;
  m_admission.OnAdmitted(from, now);
  steps.admitted = true;
  // A cookie verifies for less than two windows; a little margin for clock granularity.
  const Microseconds expiresAt =
      now + 2 * Microseconds{m_context.options.cookieWindow} * 1000 + 1'000'000;
  m_handshakeExpiries.push_back(HandshakeExpiry{expiresAt, slot, m_slots[slot].generation});
  try {
    m_byHandshake.emplace(HandshakeKey{from, clientId}, slot);
  } catch (...) {
    m_handshakeExpiries.pop_back();
    throw;
  }
  m_slots[slot].inHandshakeMap = true;
  m_slots[slot].handshakeExpiresAt = expiresAt;
  steps.handshakeListed = true;
  steps.clientId = clientId;
  steps.resetTokenListed = RegisterResetTokenOf(slot, resetToken);
  steps.resetTokenPrefix = ResetTokenPrefix(resetToken);
  ++m_context.stats.connectionsOpen;
  m_admission.OnOpened();
  steps.counted = true;
  return steps.connection;
}

void EndpointCore::OpenSlot(ConnectionCore::Role role, const Address& remote, OpenSteps& steps) {
  const std::uint32_t slot = m_slots.Allocate();
  steps.slot = slot;
  steps.slotTaken = true;
  const ConnectionId id = NewConnectionId();
  steps.connection = std::make_shared<ConnectionCore>(
      m_context, role, id, remote, ConnectionSlot{slot, m_slots[slot].generation});
  m_slots[slot].connection = steps.connection;
  m_byId.Insert(id, slot);
  steps.id = id;
}

void EndpointCore::HandOverAccepted(const std::shared_ptr<ConnectionCore>& connection) {
  // A waiter leaves its queue only once its completion is posted: if the post fails, it stays
  // first, for the next connection (this one is undone).
  if (!m_acceptWaiters.empty()) {
    Post(m_acceptWaiters.front(), EngineError::None, connection);
    m_acceptWaiters.pop_front();
    return;
  }
  if (m_shard.acceptWaiters != nullptr &&
      m_shard.acceptWaiters->ServeOldestWaiter(
          [&](ConnectCompletion& waiter) { Post(waiter, EngineError::None, connection); })) {
    return;
  }
  m_acceptQueue.push_back(connection);
  m_slots[connection->Slot().index].inAcceptQueue = true;
}

void EndpointCore::UndoOpen(OpenSteps& steps, const Address& remote) noexcept {
  if (!steps.slotTaken) return;
  const std::uint32_t slot = steps.slot;
  Slot& entry = m_slots[slot];
  if (steps.counted) {
    --m_context.stats.connectionsOpen;
    m_admission.OnClosed();
  }
  if (steps.connectPending) m_connects.erase(slot);
  if (steps.resetTokenListed) m_byResetToken.erase(steps.resetTokenPrefix);
  if (steps.retiredRoom) m_retiredHandshakes.Unreserve();
  if (steps.handshakeListed) {
    m_byHandshake.erase(HandshakeKey{remote, steps.clientId});
    entry.inHandshakeMap = false;
    ++m_deadHandshakeExpiries;  // its entry stays in the list until compacted
  }
  if (steps.id != 0) m_byId.Erase(steps.id);
  if (steps.admitted) m_admission.OnEnded(remote);
  // The connection's destructor gives its timers back (no expiry of theirs is still to come).
  entry.connection.reset();
  steps.connection.reset();
  ++entry.generation;
  m_slots.Unallocate(slot);
}

void EndpointCore::OnReset(const Address& from, const PacketHeader& header) {
  auto& stats = m_context.stats;
  const auto found = m_byResetToken.find(ResetTokenPrefix(header.resetToken));
  if (found == m_byResetToken.end()) {
    ++stats.droppedUnknownConnection;
    return;
  }
  const std::uint32_t slot = found->second;
  const std::shared_ptr<ConnectionCore> connection = m_slots[slot].connection;
  // The whole token, from the peer's address, for the ID we send to: only the peer (or one who
  // saw the handshake) can know it.
  if (connection->PeerResetToken() != header.resetToken || connection->Remote() != from ||
      connection->PeerId() != header.destination) {
    ++stats.droppedUnexpected;
    return;
  }
  ++stats.statelessResetsReceived;
  connection->OnStatelessReset();
  HandleEvents(slot);
}

std::uint64_t EndpointCore::RetiredHandshakeKey(const Address& from,
                                                ConnectionId clientId) const noexcept {
  const auto bytes = HashBytes(HandshakeKey{from, clientId});
  return SipHash24(m_retiredHandshakeHashKey, bytes.data(), bytes.size());
}

bool EndpointCore::Admits(const Address& from, Microseconds now) {
  return m_admission.UnderConnectionLimit() && m_admission.MayAdmit(from, now);
}

void EndpointCore::SendRefusal(const Address& to, ConnectionId clientId, Microseconds now) {
  SendStatelessRefusal(&PacketWriter::BeginRefusal, to, clientId, now);
}

void EndpointCore::SendAuthRefusal(const Address& to, ConnectionId clientId, Microseconds now) {
  // Sent only for a valid cookie, so only to an address that receives its datagrams.
  SendStatelessRefusal(&PacketWriter::BeginAuthRefusal, to, clientId, now);
}

void EndpointCore::SendStatelessRefusal(void (PacketWriter::*begin)(ConnectionId) noexcept,
                                        const Address& to, ConnectionId clientId,
                                        Microseconds now) {
  auto& stats = m_context.stats;
  ++stats.connectionsRefused;
  // 13 bytes for a 1200-byte Hello: no amplification; and rate-limited, so a flood of spoofed
  // Hellos draws a bounded trickle.
  if (clientId == 0 || !m_statelessReplies.TryTake(now)) {
    ++stats.statelessRepliesSuppressed;
    return;
  }
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), buffer.size());
  (writer.*begin)(clientId);
  m_context.Send(to, writer);
  ++stats.refusalsSent;
}

void EndpointCore::SendStatelessReset(const Address& to, ConnectionId unknownId,
                                      std::size_t receivedSize, Microseconds now) {
  auto& stats = m_context.stats;
  // Never as large as what it answers (a Reset cannot amplify, and two endpoints that both lost
  // a connection cannot bounce Resets: a Reset is never answered), and rate-limited.
  if (receivedSize <= kResetPacketSize || !m_statelessReplies.TryTake(now)) {
    ++stats.statelessRepliesSuppressed;
    return;
  }
  auto& buffer = m_context.datagram;
  PacketWriter writer(buffer.data(), buffer.size());
  writer.BeginReset(unknownId, m_context.resetTokens.For(unknownId));
  m_context.Send(to, writer);
  ++stats.statelessResetsSent;
}

void EndpointCore::RegisterResetToken(std::uint32_t slot) {
  RegisterResetTokenOf(slot, m_slots[slot].connection->PeerResetToken());
}

bool EndpointCore::RegisterResetTokenOf(std::uint32_t slot, const ResetToken& token) {
  if (IsNullResetToken(token)) return false;  // a peer without tokens cannot reset us
  // On a collision of the first 8 bytes (chance 2^-64, or a peer reusing its own token) the
  // earlier connection keeps the entry; the later one just cannot be reset.
  return m_byResetToken.emplace(ResetTokenPrefix(token), slot).second;
}

// --- Connections -------------------------------------------------------------------------------

void EndpointCore::Connect(const Address& remote, ConnectCompletion& completion) {
  if (m_shutDown) return Post(completion, EngineError::EndpointClosed, nullptr);
  if (!m_admission.UnderConnectionLimit()) {
    return Post(completion, EngineError::ConnectionLimit, nullptr);
  }
  OpenSteps steps;
  try {
    OpenSlot(ConnectionCore::Role::Client, remote, steps);
    // Its entry first, empty: the completion goes in only once nothing can fail, so that a
    // failure (and the undo, which erases the entry) leaves it with the caller.
    m_connects.emplace(steps.slot, ConnectCompletion());
    steps.connectPending = true;
    ++m_context.stats.connectionsOpen;
    m_admission.OnOpened();
    steps.counted = true;
    steps.connection->StartClient(m_io.Now());
  } catch (...) {
    UndoOpen(steps, remote);
    throw;
  }
  m_connects.find(steps.slot)->second = std::move(completion);  // cannot throw
  // The connect is open and holds the completion: from here the call does not throw. An event
  // whose completion cannot be posted waits for the connection's next (PutBackEvents).
  try {
    HandleEvents(steps.slot);
  } catch (const std::bad_alloc&) {
  }
}

void EndpointCore::Accept(ConnectCompletion& completion) {
  if (m_shutDown) return Post(completion, EngineError::EndpointClosed, nullptr);
  while (!m_acceptQueue.empty()) {
    const std::shared_ptr<ConnectionCore>& connection = m_acceptQueue.front();
    if (!IsCurrent(*connection)) {  // ended before anyone accepted it
      m_acceptQueue.pop_front();
      --m_acceptQueueEnded;
      continue;
    }
    // Posted before it leaves the queue: if the post fails, it waits there for the next accept.
    Post(completion, EngineError::None, connection);
    m_slots[connection->Slot().index].inAcceptQueue = false;
    m_acceptQueue.pop_front();
    return;
  }
  m_acceptWaiters.push_back(std::move(completion));
}

bool EndpointCore::HasAcceptable() {
  while (!m_acceptQueue.empty() && !IsCurrent(*m_acceptQueue.front())) {
    m_acceptQueue.pop_front();  // ended before anyone accepted it
    --m_acceptQueueEnded;
  }
  return !m_shutDown && !m_acceptQueue.empty();
}

bool EndpointCore::KnowsResetToken(const ResetToken& token) const {
  return m_byResetToken.find(ResetTokenPrefix(token)) != m_byResetToken.end();
}

void EndpointCore::AfterCall(ConnectionCore& connection) {
  const std::uint32_t slot = connection.Slot().index;
  if (slot < m_slots.Size() && m_slots[slot].connection.get() == &connection) HandleEvents(slot);
}

void EndpointCore::HandleEvents(std::uint32_t slot) {
  ConnectionCore& state = *m_slots[slot].connection;
  if (state.TerminationUnfinished()) state.FinishTermination();  // cut short by a failed post
  const auto events = state.TakeEvents();
  if (!events.established && !events.finished) return;  // almost every call
  // Held here, as Retire drops the slot's reference. Not taken on every call: the reference
  // count's two atomic operations were most of this function's cost (3 % of a busy server's
  // thread at 1,000 connections x 100 messages/s).
  const std::shared_ptr<ConnectionCore> connection = m_slots[slot].connection;
  const auto pending = m_connects.find(slot);
  if (pending != m_connects.end()) {
    try {
      if (events.established) {
        Post(pending->second, EngineError::None, connection);
      } else {
        Post(pending->second, connection->EndReason(), nullptr);
      }
    } catch (...) {
      connection->PutBackEvents(events);  // the connect and the retirement wait for the next try
      throw;
    }
    m_connects.erase(pending);
  }
  if (events.finished) Retire(slot);
}

void EndpointCore::Retire(std::uint32_t slot) {
  Slot& entry = m_slots[slot];
  const auto& connection = entry.connection;
  m_byId.Erase(connection->LocalId());
  if (!IsNullResetToken(connection->PeerResetToken())) {
    const auto token = m_byResetToken.find(ResetTokenPrefix(connection->PeerResetToken()));
    if (token != m_byResetToken.end() && token->second == slot) m_byResetToken.erase(token);
  }
  if (connection->GetRole() == ConnectionCore::Role::Server)
    m_admission.OnEnded(connection->Remote());
  if (entry.inHandshakeMap) {
    m_byHandshake.erase(HandshakeKey{connection->Remote(), connection->PeerId()});
    entry.inHandshakeMap = false;
    ++m_deadHandshakeExpiries;  // its expiry entry stays in the list until compacted
    // Its cookie still verifies. Plaintext handshakes are not remembered: they authenticate
    // nothing, so a replay gives an on-path attacker no more than forging one would. A keyed
    // one goes into the room reserved at its accept: nothing here can fail.
    if (connection->IsEncrypted()) {
      m_retiredHandshakes.Add(RetiredHandshakeKey(connection->Remote(), connection->PeerId()),
                              entry.handshakeExpiresAt);
    }
  }
  if (entry.inAcceptQueue) {  // ended before anyone accepted it: dropped when passed or compacted
    entry.inAcceptQueue = false;
    ++m_acceptQueueEnded;
  }
  entry.connection.reset();  // the public Connection, if any, keeps the state for its caller
  ++entry.generation;        // timer expiries already detached for the old one are ignored
  m_slots.Release(slot);
  --m_context.stats.connectionsOpen;
  m_admission.OnClosed();
  CompactHandshakeExpiries();
  CompactAcceptQueue();
  ShrinkTables();
}

bool EndpointCore::IsCurrent(const ConnectionCore& connection) const noexcept {
  // Its slot may be gone: ShrinkTables cuts free slots off the table's end.
  const std::uint32_t index = connection.Slot().index;
  return index < m_slots.Size() && m_slots[index].connection.get() == &connection;
}

void EndpointCore::CompactAcceptQueue() noexcept {
  const std::size_t live = m_acceptQueue.size() - m_acceptQueueEnded;
  if (m_acceptQueueEnded <= live + 64) return;  // amortised O(1) per ended connection
  // In place, so nothing is allocated (this runs as a connection ends, which must not fail);
  // libstdc++'s deque frees the blocks the erase empties.
  m_acceptQueue.erase(std::remove_if(m_acceptQueue.begin(), m_acceptQueue.end(),
                                     [this](const std::shared_ptr<ConnectionCore>& connection) {
                                       return !IsCurrent(*connection);
                                     }),
                      m_acceptQueue.end());
  m_acceptQueueEnded = 0;
}

void EndpointCore::Shutdown() {
  if (m_shutDown) return;
  const auto reason = EngineError::EndpointClosed;
  for (std::uint32_t slot = 0; slot < m_slots.Size(); ++slot) {
    if (!m_slots[slot].connection) continue;
    m_slots[slot].connection->Shutdown(reason);
    HandleEvents(slot);
  }
  while (!m_acceptWaiters.empty()) {  // each leaves once posted: a failed post leaves the rest
    Post(m_acceptWaiters.front(), reason, nullptr);
    m_acceptWaiters.pop_front();
  }
  m_acceptQueue.clear();
  m_acceptQueueEnded = 0;
  m_shutDown = true;
}

void EndpointCore::ExpireHandshakeEntries(Microseconds now) {
  while (m_handshakeExpiryHead < m_handshakeExpiries.size() &&
         m_handshakeExpiries[m_handshakeExpiryHead].at <= now) {
    const HandshakeExpiry expiry = m_handshakeExpiries[m_handshakeExpiryHead++];
    if (IsLive(expiry)) {
      Slot& entry = m_slots[expiry.slot];
      m_byHandshake.erase(HandshakeKey{entry.connection->Remote(), entry.connection->PeerId()});
      entry.inHandshakeMap = false;
      // Its cookie no longer verifies: a replay is refused without remembering the handshake.
      if (entry.connection->IsEncrypted()) m_retiredHandshakes.Unreserve();
    } else {
      --m_deadHandshakeExpiries;
    }
  }
  CompactHandshakeExpiries();
}

bool EndpointCore::IsLive(const HandshakeExpiry& expiry) const noexcept {
  return expiry.slot < m_slots.Size() && m_slots[expiry.slot].generation == expiry.generation &&
         m_slots[expiry.slot].inHandshakeMap;
}

void EndpointCore::CompactHandshakeExpiries() {
  const std::size_t queued = m_handshakeExpiries.size() - m_handshakeExpiryHead;
  if (queued == 0) {
    m_handshakeExpiries.clear();
    m_handshakeExpiryHead = 0;
    m_deadHandshakeExpiries = 0;
  } else {
    const std::size_t live = queued - m_deadHandshakeExpiries;
    // Amortised O(1): a rebuild costs O(size) and happens only once half the vector is popped
    // or dead entries outnumber live ones.
    if (m_handshakeExpiryHead < queued && m_deadHandshakeExpiries <= live + 64) return;
    std::size_t kept = 0;
    for (std::size_t i = m_handshakeExpiryHead; i < m_handshakeExpiries.size(); ++i) {
      if (IsLive(m_handshakeExpiries[i])) m_handshakeExpiries[kept++] = m_handshakeExpiries[i];
    }
    m_handshakeExpiries.resize(kept);
    m_handshakeExpiryHead = 0;
    m_deadHandshakeExpiries = 0;
  }
  if (m_handshakeExpiries.capacity() > 4 * m_handshakeExpiries.size() + 64) {
    ShrinkCapacity(m_handshakeExpiries);
  }
}

void EndpointCore::ShrinkTables() {
  m_byId.ShrinkIfSparse();
  ShrinkMapIfSparse(m_byHandshake);
  ShrinkMapIfSparse(m_byResetToken);
  m_slots.ShrinkIfSparse();
}

EndpointCore::TableSizes EndpointCore::Tables() const {
  TableSizes sizes;
  sizes.slots = m_slots.Size();
  sizes.connectionIds = m_byId.Size();
  sizes.connectionIdBuckets = m_byId.Capacity();
  sizes.handshakes = m_byHandshake.size();
  sizes.handshakeExpiries = m_handshakeExpiries.size() - m_handshakeExpiryHead;
  sizes.retiredHandshakes = m_retiredHandshakes.Size();
  sizes.retiredHandshakeRooms = m_retiredHandshakes.Reserved();
  sizes.acceptQueue = m_acceptQueue.size();
  sizes.resetTokens = m_byResetToken.size();
  sizes.admissionAddresses = m_admission.TrackedAddresses();
  sizes.admissionPrefixes = m_admission.TrackedPrefixes();
  sizes.keyExchangeAddresses = m_keyExchanges.TrackedAddresses();
  sizes.keyExchangePrefixes = m_keyExchanges.TrackedPrefixes();
  sizes.keyExchangeShareCapacity = m_keyExchanges.TableCapacity();
  return sizes;
}

ConnectionCore* EndpointCore::FindConnection(ConnectionId localId) noexcept {
  const std::uint32_t slot = m_byId.Find(localId);
  return slot == ConnectionIdTable::kNotFound ? nullptr : m_slots[slot].connection.get();
}

ConnectionId EndpointCore::NewConnectionId() {
  for (;;) {
    const ConnectionId id = IdOfShard(m_context.connectionIds.Next(), m_shard.index, m_shard.count);
    if (!m_byId.Contains(id)) return id;
  }
}

namespace {
// A connect's or an accept's completion with its result, posted as one Completion.
struct ConnectResult {
  ConnectCompletion completion;
  std::shared_ptr<ConnectionCore> connection;
  void operator()(EngineError error) { completion(error, std::move(connection)); }
};
// Inline: making the Completion cannot fail, so only the post can, and then it is taken back.
static_assert(Completion::kHoldsInline<ConnectResult>);
}  // namespace

void EndpointCore::Post(ConnectCompletion& completion, EngineError error,
                        std::shared_ptr<ConnectionCore> connection) {
  Completion handler = ConnectResult{std::move(completion), std::move(connection)};
  try {
    m_io.Post(handler, error);
  } catch (...) {
    ConnectResult* const result = handler.Target<ConnectResult>();
    assert(result != nullptr && "IEndpointIo::Post took the handler and threw");
    completion = std::move(result->completion);
    throw;
  }
}

// --- Timers ------------------------------------------------------------------------------------

void EndpointCore::OnTimer(UserData userData) {
  if (m_shutDown) return;
  const TimerTarget target = UnpackTimerTarget(userData);
  const std::uint32_t slot = target.connection.index;
  if (slot >= m_slots.Size() || m_slots[slot].generation != target.connection.generation ||
      !m_slots[slot].connection) {
    return;  // the connection this expiry was for is gone
  }
  const Microseconds now = m_io.Now();
  if (m_handshakeExpiryHead < m_handshakeExpiries.size()) ExpireHandshakeEntries(now);
  m_retiredHandshakes.Expire(now);
  m_keyExchanges.ForgetStale(now);  // a comparison while no share is held
  m_slots[slot].connection->OnTimer(target.kind, now);
  HandleEvents(slot);
}

EndpointStatistics EndpointCore::Statistics() const {
  EndpointStatistics stats = m_context.stats;
  stats.receiveMemoryInUse = m_context.receivePool.BytesInUse();
  stats.receiveMemoryAllocated = m_context.receivePool.BytesAllocated();
  const TableSizes tables = Tables();
  stats.connectionSlots = tables.slots;
  stats.handshakeExpiryEntries = tables.handshakeExpiries;
  stats.admissionAddresses = tables.admissionAddresses;
  return stats;
}

}  // namespace timerwheel::rudp::detail
