// How an Endpoint and its connections behave: one options struct, validated at construction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "TimerQueue/ITimerQueueMonitor.h"
#include "TimerQueue/TimerTypes.h"

namespace timerwheel::rudp {

// Which ITimerQueue holds the connections' timers.
enum class TimerQueueKind {
  Wheel,  // TimerWheel: O(1) re-arm; the default, and what the transport was built for
  Heap,   // TimerQueue (indexed heap): O(log n); for comparison
};

enum class CongestionControl {
  // Model-based (BBRv3-style): paces at the estimated bottleneck bandwidth and keeps about two
  // BDPs in flight; loss counts as congestion only above 2 % per round trip with a rising RTT, so
  // random loss does not slow it. The default: for the open Internet, lossy links included.
  Bbr,
  // RFC 9002 NewReno with HyStart++ and pacing: halves on every loss event. For paths where loss
  // means congestion and a loss-based controller is expected (sharing with TCP Reno/CUBIC).
  NewReno,
  // The "known path" profile: no congestion window and no pacing; only the peer's receive window
  // limits sending. For a path you own end to end (a LAN, a private link) whose capacity you
  // know; on a shared path it will cause congestion collapse. Loss recovery still runs.
  None,
};

struct EndpointOptions {
  // Accepting connections (servers). A client-only endpoint leaves this false and answers no Hello.
  bool acceptIncoming = false;
  // Established but not yet accepted (at least 1 with acceptIncoming); beyond: Hellos dropped.
  std::size_t acceptBacklog = 1024;
  std::size_t maxConnections = 200'000;  // all connections of the endpoint, in any state

  // Sizes.
  std::size_t maxDatagramSize = 1200;    // UDP payload: safe on IPv6 and through tunnels
  std::size_t maxMessageSize = 1 << 20;  // larger AsyncSends fail with Error::MessageTooLarge
  // Flow-control window, bytes, at most 2^40; 0: max(2 MiB, maxMessageSize + 64 KiB).
  std::size_t receiveWindow = 0;
  // Unacknowledged bytes kept per connection, in [64, 2^40]; 0: receiveWindow (at least 64).
  std::size_t sendBufferSize = 0;

  // Time.
  Milliseconds maxAckDelay =
      5;  // how long an ACK may be delayed (the timer's granularity is added when advertised)
  Milliseconds keepaliveInterval = 15'000;  // a PING after this long without sending anything
  // No sign for this long (and >= 3 PTOs) that the peer hears us: TimedOut, after one PING's
  // grace if it still talks to us (docs/reliable-udp.md, "Idle timeout").
  Milliseconds idleTimeout = 30'000;
  Milliseconds handshakeTimeout = 10'000;  // AsyncConnect gives up with TimedOut
  Milliseconds cookieWindow = 10'000;  // a handshake cookie is valid for one to two; at most 10 min

  CongestionControl congestionControl = CongestionControl::Bbr;
  bool pacing = true;  // with Bbr or NewReno: pace (off: NewReno bursts its window; Bbr ignores it)

  // Timers.
  TimerQueueKind timerQueue = TimerQueueKind::Wheel;
  Milliseconds timerGranularity = 1;           // the wheel's slot width
  ITimerQueueMonitor* timerMonitor = nullptr;  // not owned; outlives the endpoint

  // Socket buffers (requested; the OS may grant less: EndpointStatistics says what it granted).
  // On Linux `net.core.rmem_max`/`wmem_max` cap a request; a process with CAP_NET_ADMIN gets
  // more than the cap (SO_RCVBUFFORCE). A server that takes bursts from many peers (a million
  // connections' keepalives meeting their handshakes) needs more than the default: a full buffer
  // drops datagrams (EndpointStatistics::droppedSocketBufferFull), and each lost PING is a probe.
  int socketReceiveBufferSize = 4 << 20;
  int socketSendBufferSize = 4 << 20;

  // Hostile peers: memory budgets, admission control, stateless reset. What each bounds, and the
  // memory formula these defaults give (100k connections fit in 24 GiB):
  // docs/reliable-udp.md, "Threat model" and "Memory bound".
  //
  // Receive-buffer memory one connection may hold (the pool's 1 KiB chunks), for data that does
  // not extend its in-order prefix (that data is bounded by the window), at most 2^40; 0:
  // receiveWindow (at least 2 x maxDatagramSize). Data beyond a budget is dropped unacknowledged:
  // the peer sends it again later.
  std::size_t maxReceiveMemoryPerConnection = 0;
  // Receive-buffer memory of all connections together, bytes. Data that extends a connection's
  // in-order prefix may use all of it; out-of-order data is stored only while the total stays
  // within half of it, so that peers which never fill their gaps (their data can never become
  // contiguous, and stored data is never discarded) cannot starve other connections' in-order
  // data: at most half is theirs, and retransmissions that fill an honest connection's gap still
  // find room. Out-of-order data refused for it is counted in
  // EndpointStatistics::droppedOverMemoryBudget like any other over-budget data.
  std::uint64_t maxReceiveMemory = std::uint64_t{4} << 30;
  // Admission control (servers; 0: no limit): connections from one IP address, from one /24
  // (IPv4) or /56 (IPv6) prefix, and new connections per second (a one-second burst). A server
  // over a limit answers a handshake with a refusal: AsyncConnect fails with Error::ServerBusy.
  std::size_t maxConnectionsPerAddress = 1024;
  std::size_t maxConnectionsPerPrefix = 4096;
  std::size_t newConnectionsPerSecond = 10'000;
  // Keyed handshakes (a server with serverSecretKey): each costs a key exchange (an X25519)
  // before the server can tell a client from junk replaying a valid cookie, so each shard spends
  // at most newConnectionsPerSecond of them (a one-second burst; beyond, a Refusal). Of those, one
  // IP address may take at most keyExchangesPerAddressPerSecond and one /24 (IPv4) or /56 (IPv6)
  // prefix at most keyExchangesPerPrefixPerSecond (each a one-second burst; beyond, a Refusal,
  // counted in EndpointStatistics::refusedOverKeyExchangeShare), so that one host, or one
  // network, cannot spend everyone's budget. 0: a tenth and a quarter of newConnectionsPerSecond
  // (1,000 and 2,500 at the defaults: a NAT with many clients behind one address still opens 1,000
  // keyed connections at once and 1,000 a second after, filling its maxConnectionsPerAddress
  // within about a second). At most newConnectionsPerSecond, the address's at most the prefix's;
  // both must stay 0 when newConnectionsPerSecond is 0 (key exchanges then are not limited).
  std::size_t keyExchangesPerAddressPerSecond = 0;
  std::size_t keyExchangesPerPrefixPerSecond = 0;
  // Refusals and stateless resets sent per second, together (each is smaller than the datagram
  // it answers, so neither amplifies).
  std::size_t statelessRepliesPerSecond = 1000;
  // The secret stateless-reset tokens derive from (with the connection ID). All zero: random per
  // endpoint. Give a restarted server its old secret and it can still reset the connections it
  // lost. Keep it as secret as a private key: whoever knows it can end any connection. Never
  // share one between endpoints that can receive each other's datagrams (SO_REUSEPORT siblings,
  // hosts behind one load balancer): one of them would hand an observer another's tokens
  // (docs/reliable-udp.md, "Stateless reset").
  std::array<std::uint8_t, 16> statelessResetKey{};

  // Encryption (docs/reliable-udp.md, "Encryption"): on whenever a server key is configured.
  // Servers: the static X25519 secret key (MakeServerKeyPair). All zero: none; the server then
  // accepts only plaintext connections, and with a key, only encrypted ones. Keep it secret.
  std::array<std::uint8_t, 32> serverSecretKey{};
  // Clients: the server's static X25519 public key, pinned. Every AsyncConnect then runs the
  // keyed handshake and fails with Error::AuthenticationFailed unless the server proves it holds
  // the matching secret key; every packet after it is encrypted and authenticated. All zero:
  // plaintext mode (for benchmarks and private links: anyone on the path can read, inject and
  // end connections), which a server with a key refuses.
  std::array<std::uint8_t, 32> serverPublicKey{};
  // Clients that pinned a server key: an optional token (at most 512 bytes; a password, a
  // signed ticket, whatever the server's application checks) sent inside the sealed handshake,
  // so only the pinned server reads it. The server's accept handler sees it as
  // Connection::ClientToken() and may Abort a connection whose token it refuses. Empty: none.
  // Refused without a pinned key: it would travel in clear.
  std::vector<std::uint8_t> clientToken;
  // The AEAD: AES-256-GCM when both ends allow it and their CPUs have AES-NI and PCLMUL (libsodium
  // has it only there), else ChaCha20-Poly1305. False: always ChaCha20-Poly1305 (to measure what
  // a peer without AES instructions costs, or where AES hardware is not trusted).
  bool allowAes256Gcm = true;
  // Batched socket I/O (Linux; elsewhere one datagram per system call whatever these say). The
  // engine still handles every datagram on its own; these change only how many one system call
  // carries. See UdpSocket/DatagramBatch.h.
  bool batchedIo = true;            // recvmmsg, and sendmmsg of what one engine call produced
  bool segmentationOffload = true;  // UDP_SEGMENT (GSO) for runs to one peer; needs batchedIo
  bool receiveOffload = true;       // UDP_GRO; needs batchedIo
  // Threads (issue 18): the endpoint's connections are split over this many shards, each with its
  // own lock, engine and timer queue, so that datagrams of connections in different shards are
  // handled in parallel on the io_context's threads, in arrival order within each connection. A
  // connection lives in one shard for its life: its ID says which; handshakes are spread over the
  // shards by a keyed hash of the client's address, port and ID. The connection limits
  // (maxConnections, per address, per prefix, new connections per second) hold for the endpoint
  // as a whole (passed by at most shards - 1 when shards admit at the same instant); each shard's
  // accept queue holds up to acceptBacklog; statelessRepliesPerSecond and maxReceiveMemory are
  // split evenly, each shard enforcing its share rounded up. 1 to 64; more shards than
  // io_context threads buy nothing.
  std::size_t shards = 1;
};

// A fresh X25519 key pair for a server (libsodium's random numbers): the secret key goes into the
// server's serverSecretKey, the public key to its clients (serverPublicKey).
struct ServerKeyPair {
  std::array<std::uint8_t, 32> secretKey{};
  std::array<std::uint8_t, 32> publicKey{};
};
ServerKeyPair MakeServerKeyPair();

// Throws std::invalid_argument naming the option that is out of range (e.g. keepaliveInterval >=
// idleTimeout, maxDatagramSize outside [kHelloSize, 65507], receiveWindow < maxMessageSize + 8).
// Returns the options with the 0 defaults filled in.
EndpointOptions ValidateOptions(EndpointOptions options);

}  // namespace timerwheel::rudp
