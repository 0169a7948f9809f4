// The sans-I/O endpoint: connection table, demultiplexing, stateless handshake, timers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ReliableUDP/Detail/AdmissionControl.h"
#include "ReliableUDP/Detail/ConnectionCore.h"
#include "ReliableUDP/Detail/ConnectionIdTable.h"
#include "ReliableUDP/Detail/EndpointContext.h"
#include "ReliableUDP/Detail/HandshakeCookie.h"
#include "ReliableUDP/Detail/KeyExchangeBudget.h"
#include "ReliableUDP/Detail/PeerKeyedMap.h"
#include "ReliableUDP/Detail/RetiredHandshakes.h"
#include "ReliableUDP/Detail/SipHash.h"
#include "ReliableUDP/Detail/SlotTable.h"
#include "ReliableUDP/Detail/TimerTarget.h"
#include "ReliableUDP/Detail/TokenBucket.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "TimerQueue/ITimer.h"

namespace timerwheel::rudp::detail {

// How an accept or a connect completes: with a connection, or with why there is none.
using ConnectCompletion = UniqueFunction<void(EngineError, std::shared_ptr<ConnectionCore>)>;

// Accept waiters shared by several EndpointCores (the shards of one endpoint): a connection
// established with no waiter of its core's own goes to one of these. Called with the core's
// caller's lock held; the implementation takes its own lock (after it).
class SharedAcceptWaiters {
 public:
  // Calls `serve` with the oldest waiter, under the waiters' lock, and removes the waiter once
  // `serve` returns. If `serve` throws (its post failed), the waiter stays first, for the next
  // connection. False, and `serve` is not called, if there is none.
  virtual bool ServeOldestWaiter(const std::function<void(ConnectCompletion&)>& serve) = 0;

 protected:
  ~SharedAcceptWaiters() = default;
};

// Where an EndpointCore sits among the shards of one endpoint (Sharding.h). The defaults: alone.
struct ShardRole {
  std::uint32_t index = 0;
  std::uint32_t count = 1;
  SharedAcceptWaiters* acceptWaiters = nullptr;  // nullptr: only the core's own
  // The endpoint's admission limits, shared by its shards (nullptr: the core's own).
  IAdmission* admission = nullptr;
};

// Thread safety: none, and no lock. The caller serialises every call into this object and into
// its ConnectionCores (the chunk pool and scratch buffers are shared), timer expiries included:
// the Asio endpoint wraps it with one mutex (LockedEngine), the simulated network in the tests
// runs it on one thread. Timer calls are made from inside these calls, so a locking caller holds
// its lock while the timer driver takes its own (lock order: engine, then driver), and the driver
// must dispatch without its lock (DispatchPolicy::WithoutLock). User handlers are never run here:
// they are posted through IEndpointIo::Post.
//
// State per connection is allocated only when a client echoes a valid cookie (servers) or
// connects (clients). Connection IDs are random (SipHash of a counter under a random key).
class EndpointCore final : public ITimer {
 public:
  using ConnectCompletion = detail::ConnectCompletion;

  // `options` must have been through ValidateOptions (and, for a shard, OptionsOfShard). The
  // timer queue and the I/O must outlive every call into this object before Shutdown; after it,
  // neither is used again. Timer expiries go to `timerSink`, which must call OnTimer (a locking
  // caller passes an ITimer that takes its lock first); nullptr: to this object.
  EndpointCore(IEndpointIo& io, ITimerQueue& timers, Milliseconds timerGranularity,
               const EndpointOptions& options, ITimer* timerSink = nullptr, ShardRole shard = {});
  ~EndpointCore();
  EndpointCore(const EndpointCore&) = delete;
  EndpointCore& operator=(const EndpointCore&) = delete;

  // Handles one datagram, read at `now` (one clock read serves several datagrams). Never
  // throws std::bad_alloc: a datagram whose handling runs out of memory is dropped and counted
  // (droppedOutOfMemory).
  void OnDatagram(const Address& from, const std::uint8_t* data, std::size_t size,
                  Microseconds now);
  void OnDatagram(const Address& from, const std::uint8_t* data, std::size_t size) {
    OnDatagram(from, data, size, m_io.Now());
  }
  // Opens a client connection to `remote`; `completion` runs once it is established or has
  // failed. Takes `completion` unless it throws (std::bad_alloc, the open taken back whole):
  // then the completion is still the caller's, so that the caller can destroy it once it holds
  // no lock (it may hold the last reference to a public Connection, whose end takes the lock).
  void Connect(const Address& remote, ConnectCompletion& completion);
  void Connect(const Address& remote, ConnectCompletion&& completion) {
    Connect(remote, completion);
  }
  // Takes `completion` unless it throws (a post that cannot get its memory): then the
  // completion, and any connection that was ready for it, stay where they were.
  void Accept(ConnectCompletion& completion);
  void Accept(ConnectCompletion&& completion) { Accept(completion); }
  // Whether an established connection waits for an accept (ended ones are dropped on the way):
  // Accept would complete at once.
  bool HasAcceptable();
  // Whether a connection of this core gave the peer reset token `token` (a Reset for it belongs
  // here).
  bool KnowsResetToken(const ResetToken& token) const;
  // Ends every connection with EndpointClosed, fails pending connects and accepts, destroys
  // every timer. Afterwards the endpoint does nothing (IsShutDown).
  void Shutdown();
  bool IsShutDown() const noexcept { return m_shutDown; }

  // After calling into a connection from outside (the public Connection): handles what it
  // reports (connect completion, retirement).
  void AfterCall(ConnectionCore& connection);

  EndpointStatistics Statistics() const;

  // How many entries each per-endpoint structure holds now (and the hash maps' bucket counts),
  // for tests and monitoring: each is bounded and shrinks back after a burst.
  struct TableSizes {
    std::size_t slots = 0;          // connection table, including free slots
    std::size_t connectionIds = 0;  // by connection ID
    std::size_t connectionIdBuckets = 0;
    std::size_t handshakes = 0;             // handshakes whose cookie could still be replayed
    std::size_t handshakeExpiries = 0;      // their expiry list, dead entries included
    std::size_t retiredHandshakes = 0;      // keyed handshakes ended while their cookie verifies
    std::size_t retiredHandshakeRooms = 0;  // reserved for keyed connections still listed
    std::size_t acceptQueue = 0;  // waiting for an accept, ended ones not yet dropped included
    std::size_t resetTokens = 0;
    std::size_t admissionAddresses = 0;
    std::size_t admissionPrefixes = 0;
    // Addresses and prefixes that took a key exchange within about the last second (their share
    // of the key-exchange budget), each at most keyExchangeShareCapacity.
    std::size_t keyExchangeAddresses = 0;
    std::size_t keyExchangePrefixes = 0;
    std::size_t keyExchangeShareCapacity = 0;
  };
  TableSizes Tables() const;
  // The connection whose own ID is `localId` (nullptr: none). For tests and fuzzers that speak
  // for its peer with its keys (ConnectionCore::Keys).
  ConnectionCore* FindConnection(ConnectionId localId) noexcept;
  EndpointContext& Context() noexcept { return m_context; }
  Microseconds Now() const { return m_io.Now(); }

  void OnTimer(UserData userData) override;  // ITimer

  // A handshake's identity: the peer's address and the client ID it chose (public for its test).
  struct HandshakeKey {
    Address remote;
    ConnectionId clientId = 0;
    bool operator==(const HandshakeKey& other) const noexcept {
      return clientId == other.clientId && remote == other.remote;
    }
    // For PeerKeyedMap and RetiredHandshakeKey: the family, the address, the port and the client
    // ID (a hash that left the address out let peers on many addresses share one bucket by
    // choosing the client ID and the port). The scope is left out: equal keys still hash equal.
    friend std::array<std::uint8_t, 27> HashBytes(const HandshakeKey& key) noexcept {
      std::array<std::uint8_t, 27> bytes{};
      bytes[0] = static_cast<std::uint8_t>(key.remote.family);
      for (std::size_t i = 0; i < 16; ++i) bytes[1 + i] = key.remote.bytes[i];
      bytes[17] = static_cast<std::uint8_t>(key.remote.port >> 8);
      bytes[18] = static_cast<std::uint8_t>(key.remote.port);
      for (std::size_t i = 0; i < 8; ++i)
        bytes[19 + i] = static_cast<std::uint8_t>(key.clientId >> (8 * i));
      return bytes;
    }
  };

 private:
  void HandleDatagram(const Address& from, const std::uint8_t* data, std::size_t size,
                      Microseconds now);
  struct Slot {
    std::shared_ptr<ConnectionCore> connection;
    std::uint32_t generation = 0;
    bool inHandshakeMap = false;          // server side, while its cookie could still be replayed
    Microseconds handshakeExpiresAt = 0;  // when its cookie stops verifying (server side)
    bool inAcceptQueue = false;           // established, waiting for an accept
    bool InUse() const noexcept { return connection != nullptr; }
  };

  void OnHello(const Address& from, const PacketHeader& header);
  void OnHelloWithCookie(const Address& from, const PacketHeader& header);
  void OnSecureHelloWithCookie(const Address& from, const DecodedPacket& packet,
                               const std::uint8_t* data, std::size_t size);
  // The checks both handshakes share. CookieHolds: the cookie verifies and no connection exists
  // for it yet (else the existing one repeats its Welcome). MayAccept: backlog and admission
  // (else a Refusal).
  bool CookieHolds(const Address& from, const PacketHeader& header, Microseconds now);
  bool MayAccept(const Address& from, ConnectionId clientId, Microseconds now);
  // What opening a connection has done so far. An allocation can fail at any step of an open
  // (the tables' growth, the connection's buffers, the queue's timer records, a completion's
  // post); UndoOpen then takes back exactly these steps, so that no slot, table entry or count
  // is held for a connection that never was (an admission count leaked that way would refuse its
  // address for ever), and the exception goes on: out of Connect, or to OnDatagram, which drops
  // the datagram as if it had not come. The open is complete,
  // and no longer undone, once the connection is handed to its completion or accept queue.
  struct OpenSteps {
    std::uint32_t slot = 0;
    bool slotTaken = false;
    std::shared_ptr<ConnectionCore> connection;  // in the slot
    ConnectionId id = 0;                         // in m_byId (0: not yet)
    bool admitted = false;                       // the remote's admission counts (server)
    bool handshakeListed = false;  // in m_byHandshake and m_handshakeExpiries (server)
    ConnectionId clientId = 0;
    bool resetTokenListed = false;  // in m_byResetToken
    std::uint64_t resetTokenPrefix = 0;
    bool connectPending = false;  // in m_connects (client)
    bool counted = false;         // connectionsOpen and the connection limit
    bool retiredRoom = false;     // a room reserved in m_retiredHandshakes (keyed server)
  };
  void UndoOpen(OpenSteps& steps, const Address& remote) noexcept;
  // The steps every open begins with: a slot, a connection ID and the connection in both.
  void OpenSlot(ConnectionCore::Role role, const Address& remote, OpenSteps& steps);
  // The server side of a connection, made for a handshake that passed every check: `start`
  // starts it (plaintext, or keyed: then its handshake will be remembered as it ends, in a room
  // reserved here), then it goes to an accept.
  template <class Start>
  void OpenServerConnection(const Address& from, ConnectionId clientId,
                            const ResetToken& resetToken, Microseconds now, bool keyed,
                            Start&& start);
  std::shared_ptr<ConnectionCore> AcceptConnection(const Address& from, ConnectionId clientId,
                                                   const ResetToken& resetToken, Microseconds now,
                                                   OpenSteps& steps);
  void HandOverAccepted(const std::shared_ptr<ConnectionCore>& connection);
  void OnReset(const Address& from, const PacketHeader& header);
  // The key of a handshake in m_retiredHandshakes: a keyed hash, so that nobody can aim
  // collisions at a client's handshake.
  std::uint64_t RetiredHandshakeKey(const Address& from, ConnectionId clientId) const noexcept;
  // Whether a new connection from `from` may be made now (connection limit, admission control).
  bool Admits(const Address& from, Microseconds now);
  // Stateless replies, rate-limited together and always smaller than what they answer.
  void SendRefusal(const Address& to, ConnectionId clientId, Microseconds now);
  void SendAuthRefusal(const Address& to, ConnectionId clientId, Microseconds now);
  // Either refusal (`begin` writes its type), counted, rate-limited with the other stateless
  // replies.
  void SendStatelessRefusal(void (PacketWriter::*begin)(ConnectionId) noexcept, const Address& to,
                            ConnectionId clientId, Microseconds now);
  void SendStatelessReset(const Address& to, ConnectionId unknownId, std::size_t receivedSize,
                          Microseconds now);
  void RegisterResetToken(std::uint32_t slot);
  // Whether the token now names the slot (false: no token, or an earlier connection has it).
  bool RegisterResetTokenOf(std::uint32_t slot, const ResetToken& token);
  ConnectionId NewConnectionId();
  void HandleEvents(std::uint32_t slot);
  void Retire(std::uint32_t slot);
  // As IEndpointIo::Post: if it throws, `completion` is still the caller's.
  void Post(ConnectCompletion& completion, EngineError error,
            std::shared_ptr<ConnectionCore> connection);

  IEndpointIo& m_io;
  const ShardRole m_shard;
  EndpointContext m_context;
  HandshakeCookie m_cookies;
  std::unique_ptr<AdmissionControl> m_ownAdmission;  // unless the shards share one
  IAdmission& m_admission;
  TokenBucket m_statelessReplies;  // refusals and resets
  // Key exchanges of keyed handshakes (an X25519 each, before the handshake can be judged), at
  // most newConnectionsPerSecond: a cookie replayed with junk cannot buy unbounded CPU; and of
  // those at most a share for one address and one prefix, so that one host replaying its cookie
  // cannot spend everyone's.
  KeyExchangeBudget m_keyExchanges;
  // Connections by the first 8 bytes of the reset token their peer gave (when it gave one).
  PeerKeyedMap<std::uint64_t, std::uint32_t> m_byResetToken;
  bool m_shutDown = false;
  SlotTable<Slot> m_slots{kMaxConnectionSlots};
  ConnectionIdTable m_byId;
  PeerKeyedMap<HandshakeKey, std::uint32_t> m_byHandshake;
  // Keyed handshakes whose connection ended within its cookie's lifetime: a replay is dropped.
  RetiredHandshakes m_retiredHandshakes;
  SipHashKey m_retiredHandshakeHashKey;
  // When each handshake entry may go: once its cookie is stale, a repeated HelloWithCookie is
  // refused anyway, so idle connections stop paying for the entry. In expiry order.
  struct HandshakeExpiry {
    Microseconds at = 0;
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
  };
  void ExpireHandshakeEntries(Microseconds now);
  bool IsLive(const HandshakeExpiry& expiry) const noexcept;
  void CompactHandshakeExpiries();
  void ShrinkTables();
  // In expiry order from m_handshakeExpiryHead on. An entry is dead once its connection retired
  // before it expired; dead entries are dropped in a compaction once they outnumber the live
  // ones, so the list holds at most 2 x live + 64 entries (before, it emptied only when every
  // entry had expired, so handshake churn grew it without bound, and it never shrank).
  std::vector<HandshakeExpiry> m_handshakeExpiries;
  std::size_t m_handshakeExpiryHead = 0;
  std::size_t m_deadHandshakeExpiries = 0;
  std::unordered_map<std::uint32_t, ConnectCompletion> m_connects;  // by slot, until done
  // Established and not yet accepted, in order; a connection that ends meanwhile stays until an
  // accept passes it or a compaction drops it (so that ending one costs O(1), not a scan of the
  // queue: at 1M connections, with a backlog of hundreds of thousands, the scans and a vector's
  // erase at the front made draining quadratic). At most 2 x the live entries + 64.
  std::deque<std::shared_ptr<ConnectionCore>> m_acceptQueue;
  std::size_t m_acceptQueueEnded = 0;  // entries whose connection has ended
  void CompactAcceptQueue() noexcept;
  // Whether `connection` is still the one in its slot (it has not ended).
  bool IsCurrent(const ConnectionCore& connection) const noexcept;
  std::deque<ConnectCompletion> m_acceptWaiters;
};

}  // namespace timerwheel::rudp::detail
