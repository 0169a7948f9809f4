// Snapshots of what a connection and an endpoint have done, for monitoring and tests.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace timerwheel::rudp {

// The kinds of per-connection timer deadline, as ConnectionStatistics counts them. Each is an
// ITimerQueue timer, except that the keepalive and the connection's deadline share one: it is
// armed at the earlier of the two (docs/reliable-udp.md, "Timers").
enum class TimerKind : unsigned {
  LossDetection = 0,  // loss time or probe timeout (and handshake retransmission)
  DelayedAck,
  Pacing,
  Keepalive,
  // When the connection ends unless something happens first: the idle timeout (restarted by
  // progress), the handshake timeout, or the end of the draining period.
  ConnectionDeadline,
};
inline constexpr unsigned kTimerKindCount = 5;

// The phases of the model-based congestion controller (CongestionControl::Bbr).
enum class CongestionPhase : unsigned {
  Startup = 0,    // doubling the rate each round trip until the bandwidth stops growing
  Drain,          // emptying the queue Startup built
  ProbeBwDown,    // below the estimate, draining what the last probe queued
  ProbeBwCruise,  // at the estimate
  ProbeBwRefill,  // one round at the estimate with the short-term bounds lifted
  ProbeBwUp,      // above the estimate, looking for more bandwidth
  ProbeRtt,       // a small window for a moment, to measure the empty-queue round trip
};
inline constexpr unsigned kCongestionPhaseCount = 7;

struct ConnectionStatistics {
  // Round trip, microseconds (0 until the first sample).
  std::uint64_t smoothedRttMicroseconds = 0;
  std::uint64_t rttVariationMicroseconds = 0;
  std::uint64_t minRttMicroseconds = 0;
  std::uint64_t latestRttMicroseconds = 0;
  // Congestion control, bytes.
  std::uint64_t congestionWindow = 0;
  std::uint64_t bytesInFlight = 0;
  std::uint64_t congestionEvents = 0;
  std::uint64_t persistentCongestion = 0;
  // Packets and bytes on the wire (datagram sizes).
  std::uint64_t packetsSent = 0;
  std::uint64_t packetsReceived = 0;
  std::uint64_t bytesSent = 0;
  std::uint64_t bytesReceived = 0;
  // Application data.
  std::uint64_t messagesSent = 0;      // AsyncSend completions
  std::uint64_t messagesReceived = 0;  // AsyncReceive completions
  std::uint64_t streamBytesSent = 0;  // first transmissions of stream bytes (incl. length prefixes)
  std::uint64_t streamBytesRetransmitted = 0;
  // Loss recovery.
  std::uint64_t packetsRetransmitted = 0;  // packets that carried retransmitted stream bytes
  std::uint64_t packetsLost = 0;           // declared lost
  std::uint64_t spuriousRetransmits = 0;   // declared lost, then acknowledged
  std::uint64_t probeTimeouts = 0;         // PTO expirations
  std::uint64_t duplicatePacketsReceived = 0;
  std::uint64_t flowControlStalls = 0;  // times new data waited for the peer's window
  // Timers: how often each kind was armed (set or re-set) and how often it fired.
  std::uint64_t timerArmed[kTimerKindCount] = {};
  std::uint64_t timerFired[kTimerKindCount] = {};
  // Sent-packet records looked at by ACK processing and loss detection, in total: what ACK
  // frames cost this side (bounded per frame by its ranges and what it newly acknowledges).
  std::uint64_t ackRecordsVisited = 0;
  // Records the sent-packet log has room for (88 bytes each): what a busy spell grew it to (one
  // per packet in flight or held for loss detection), until a quiet moment gives it back.
  std::uint64_t sentPacketRecordRoom = 0;
  // The model-based controller's estimates at the last ACK (0 for the other controllers).
  std::uint64_t bandwidthEstimate = 0;  // bytes per second
  std::uint64_t modelMinRttMicroseconds = 0;
  std::uint64_t congestiveLossRounds = 0;  // round trips whose loss counted as congestion
  // Bandwidth-probing-cycle round trips (Cruise, or Down after 3 rounds) that never emptied the
  // queue, after which it paced at what the round delivered and drained.
  std::uint64_t standingQueueRounds = 0;
  // Slow starts (NewReno's HyStart++) or Startups (Bbr) ended by a rising RTT, before any loss.
  std::uint64_t startupExitsOnDelay = 0;
  std::uint64_t phaseMicroseconds[kCongestionPhaseCount] = {};  // time spent, by CongestionPhase
  // Encryption: whether the connection is encrypted, and its key updates so far.
  bool encrypted = false;
  bool aes256Gcm = false;  // encrypted with AES-256-GCM (else ChaCha20-Poly1305)
  std::uint64_t keyUpdates = 0;
};

inline const char* CongestionPhaseName(CongestionPhase phase) {
  static const char* const kNames[kCongestionPhaseCount] = {
      "Startup",        "Drain",      "ProbeBW-down", "ProbeBW-cruise",
      "ProbeBW-refill", "ProbeBW-up", "ProbeRTT"};
  const auto index = static_cast<unsigned>(phase);
  return index < kCongestionPhaseCount ? kNames[index] : "?";
}

// The congestion controller's state in one line, for logs and the end of a transfer: the model
// (estimated bandwidth, min RTT), the losses, and the share of time in each phase (Bbr), e.g.
// "bw 48.1 Mbit/s, min RTT 20.1 ms, srtt 21.0 ms, cwnd 250 KB, lost 12 (congestive rounds 1),
// standing-queue rounds 3, delay exits 1, phases Startup 2% Drain 0% ProbeBW-down 4% ...".
// Controllers without a model show the window.
inline std::string DescribeCongestion(const ConnectionStatistics& statistics) {
  char buffer[256];
  std::string text;
  const auto ms = [](std::uint64_t us) { return static_cast<double>(us) / 1000.0; };
  std::snprintf(buffer, sizeof buffer,
                "bw %.1f Mbit/s, min RTT %.1f ms, srtt %.1f ms, cwnd %.0f KB, lost %llu "
                "(congestive rounds %llu), standing-queue rounds %llu, delay exits %llu",
                static_cast<double>(statistics.bandwidthEstimate) * 8 / 1e6,
                ms(statistics.modelMinRttMicroseconds), ms(statistics.smoothedRttMicroseconds),
                static_cast<double>(statistics.congestionWindow) / 1024,
                static_cast<unsigned long long>(statistics.packetsLost),
                static_cast<unsigned long long>(statistics.congestiveLossRounds),
                static_cast<unsigned long long>(statistics.standingQueueRounds),
                static_cast<unsigned long long>(statistics.startupExitsOnDelay));
  text += buffer;
  std::uint64_t total = 0;
  for (std::uint64_t us : statistics.phaseMicroseconds) total += us;
  if (total == 0) return text;
  text += ", phases";
  for (unsigned phase = 0; phase < kCongestionPhaseCount; ++phase) {
    std::snprintf(buffer, sizeof buffer, " %s %.0f%%",
                  CongestionPhaseName(static_cast<CongestionPhase>(phase)),
                  100.0 * static_cast<double>(statistics.phaseMicroseconds[phase]) /
                      static_cast<double>(total));
    text += buffer;
  }
  return text;
}

struct EndpointStatistics {
  std::uint64_t datagramsReceived = 0;
  std::uint64_t datagramsSent = 0;
  std::uint64_t bytesReceived = 0;
  std::uint64_t bytesSent = 0;
  // Every datagram that was not used, by cause.
  std::uint64_t droppedMalformed = 0;  // failed to decode (size, version, type, frames)
  std::uint64_t droppedBadChecksum = 0;
  std::uint64_t droppedUnknownConnection = 0;  // a Data packet for no connection of ours
  std::uint64_t droppedBadCookie = 0;          // a HelloWithCookie with a forged or stale cookie
  std::uint64_t droppedNotAccepting = 0;       // a Hello to an endpoint that does not accept
  std::uint64_t droppedBacklogFull = 0;        // accept backlog or connection limit reached
  std::uint64_t droppedUnexpected = 0;         // valid, but not expected in this state
  std::uint64_t droppedProtocolViolation =
      0;  // e.g. an ACK of an unsent packet, data beyond the window
  std::uint64_t droppedTooFragmented = 0;  // out-of-order data over the reassembly bound
  std::uint64_t droppedWrongAddress = 0;   // a known connection ID from another address
  // From source port 0, to which nothing can be sent (a send fails: EINVAL on Linux), so spoofed:
  // dropped as it enters the engine, before anything answers it or looks it up.
  std::uint64_t droppedSourcePortZero = 0;
  // Its handling needed memory that could not be had (std::bad_alloc): dropped, as if lost; a
  // connection it was opening is taken back whole (docs/reliable-udp.md, "Memory bound").
  std::uint64_t droppedOutOfMemory = 0;
  std::uint64_t sendWouldBlock = 0;        // the socket buffer was full; the datagram waits
  std::uint64_t sendErrors = 0;            // not sent (no route, or the wait queue was full)
  std::uint64_t receiveErrorsIgnored = 0;  // e.g. ICMP port unreachable surfacing on Windows
  std::uint64_t cookiesSent = 0;
  std::uint64_t connectionsAccepted = 0;
  std::uint64_t connectionsOpen = 0;  // now
  // Larger than the endpoint's maxDatagramSize: dropped before parsing (no peer of ours sends
  // one, since each sends at most the smaller of the two sides' maxDatagramSize).
  std::uint64_t droppedOversize = 0;
  // Hostile peers (docs/reliable-udp.md, "Threat model").
  std::uint64_t droppedOverMemoryBudget = 0;  // stream data over a receive-memory budget
  std::uint64_t receiveMemoryInUse = 0;       // bytes of receive-buffer chunks held now
  std::uint64_t receiveMemoryAllocated = 0;   // ... and kept by the pool (in use or free)
  std::uint64_t connectionsRefused = 0;       // handshakes refused (full, admission limits, rate)
  std::uint64_t refusalsSent = 0;             // ... answered with a Refusal
  std::uint64_t statelessResetsSent = 0;
  std::uint64_t statelessResetsReceived = 0;     // connections ended by a valid Reset
  std::uint64_t statelessRepliesSuppressed = 0;  // refusals and resets not sent (rate, size)
  // Entries in the per-endpoint tables now (each bounded, shrinking back after a burst): the
  // connection table's slots (free ones included), the handshake-expiry list (dead entries
  // included: at most 2 x live handshakes + 64), the admission counts' addresses.
  std::uint64_t connectionSlots = 0;
  std::uint64_t handshakeExpiryEntries = 0;
  std::uint64_t admissionAddresses = 0;
  // Encryption (docs/reliable-udp.md, "Encryption").
  std::uint64_t droppedAuthenticationFailed = 0;  // a sealed packet or handshake did not open
  std::uint64_t droppedUnprotected = 0;           // a plaintext packet for an encrypted connection
  // A keyed handshake whose connection already ended, sent again while its cookie still verifies:
  // a replay (the client itself never resends one after its connection was established).
  std::uint64_t droppedReplayedHandshake = 0;
  // Keyed handshakes refused (a Refusal; counted in connectionsRefused too) because their source
  // address or its /24 (/56) prefix had spent its share of the key-exchange budget
  // (EndpointOptions::keyExchangesPerAddressPerSecond, keyExchangesPerPrefixPerSecond): a host
  // replaying a valid cookie with junk, or a burst from behind one NAT.
  std::uint64_t refusedOverKeyExchangeShare = 0;
  // The socket path (filled in by the Asio endpoint; 0 in the simulated network).
  std::uint64_t sendSystemCalls = 0;
  std::uint64_t receiveSystemCalls = 0;  // that returned datagrams
  std::uint64_t segmentedSends = 0;      // sends that carried several datagrams (GSO)
  std::uint64_t coalescedReceives = 0;   // receives that held several datagrams (GRO)
  std::uint64_t offloadRefusals = 0;     // GSO (per shard) or GRO (once) refused, then off
  // Datagrams read cut short (MSG_TRUNC): one over the 64 KiB receive buffer, or those of a GRO
  // buffer that did not fit it whole (Linux, batched path). Dropped, never handed on.
  std::uint64_t droppedTruncated = 0;
  // Datagrams the OS dropped before we could read them, because the socket's receive buffer was
  // full (Linux; 0 where the OS does not say): a receiver that cannot keep up. The buffers'
  // sizes as granted, in the units of EndpointOptions::socketReceiveBufferSize.
  std::uint64_t droppedSocketBufferFull = 0;
  std::uint64_t socketReceiveBufferBytes = 0;
  std::uint64_t socketSendBufferBytes = 0;
  // Threads (EndpointOptions::shards): time the endpoint's threads spent waiting for a shard's
  // lock, or for their turn to hand a shard datagrams read after others, summed over threads.
  std::uint64_t lockWaitMicroseconds = 0;
};

}  // namespace timerwheel::rudp
