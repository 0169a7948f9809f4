// Snapshots of what a connection and an endpoint have done, for monitoring and tests.
#pragma once

#include <cstdint>

namespace timerwheel::rudp {

// The kinds of per-connection timer (all of them ITimerQueue timers).
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
};

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
  std::uint64_t sendWouldBlock = 0;        // the socket buffer was full; the datagram waits
  std::uint64_t sendErrors = 0;            // not sent (no route, or the wait queue was full)
  std::uint64_t receiveErrorsIgnored = 0;  // e.g. ICMP port unreachable surfacing on Windows
  std::uint64_t cookiesSent = 0;
  std::uint64_t connectionsAccepted = 0;
  std::uint64_t connectionsOpen = 0;  // now
  // The socket path (filled in by the Asio endpoint; 0 in the simulated network).
  std::uint64_t sendSystemCalls = 0;
  std::uint64_t receiveSystemCalls = 0;  // that returned datagrams
  std::uint64_t segmentedSends = 0;      // sends that carried several datagrams (GSO)
  std::uint64_t coalescedReceives = 0;   // receives that held several datagrams (GRO)
  std::uint64_t offloadRefusals = 0;     // GSO or GRO refused by the kernel, then off
};

}  // namespace timerwheel::rudp
