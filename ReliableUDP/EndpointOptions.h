// How an Endpoint and its connections behave: one options struct, validated at construction.
#pragma once

#include <cstddef>

#include "TimerQueue/ITimerQueueMonitor.h"
#include "TimerQueue/TimerTypes.h"

namespace timerwheel::rudp {

// Which ITimerQueue holds the connections' timers.
enum class TimerQueueKind {
  Wheel,  // TimerWheel: O(1) re-arm; the default, and what the transport was built for
  Heap,   // TimerQueue (indexed heap): O(log n); for comparison
};

enum class CongestionControl {
  NewReno,  // RFC 9002 NewReno with pacing: for the open Internet
  // The "known path" profile: no congestion window and no pacing; only the peer's receive window
  // limits sending. For a path you own end to end (a LAN, a private link) whose capacity you
  // know; on a shared path it will cause congestion collapse. Loss recovery still runs.
  None,
};

struct EndpointOptions {
  // Accepting connections (servers). A client-only endpoint leaves this false and answers no Hello.
  bool acceptIncoming = false;
  std::size_t acceptBacklog = 1024;      // established but not yet accepted; beyond: Hellos dropped
  std::size_t maxConnections = 200'000;  // all connections of the endpoint, in any state

  // Sizes.
  std::size_t maxDatagramSize = 1200;    // UDP payload: safe on IPv6 and through tunnels
  std::size_t maxMessageSize = 1 << 20;  // larger AsyncSends fail with Error::MessageTooLarge
  std::size_t receiveWindow =
      0;  // flow-control window, bytes; 0: max(2 MiB, maxMessageSize + 64 KiB)
  std::size_t sendBufferSize = 0;  // unacknowledged bytes kept per connection; 0: receiveWindow

  // Time.
  Milliseconds maxAckDelay =
      5;  // how long an ACK may be delayed (the timer's granularity is added when advertised)
  Milliseconds keepaliveInterval = 15'000;  // a PING after this long without sending anything
  Milliseconds idleTimeout = 30'000;  // nothing received for this long (and >= 3 PTOs): TimedOut
  Milliseconds handshakeTimeout = 10'000;  // AsyncConnect gives up with TimedOut
  Milliseconds cookieWindow = 10'000;      // a handshake cookie is valid for one to two windows

  CongestionControl congestionControl = CongestionControl::NewReno;
  bool pacing = true;  // with NewReno: spread the window over the round trip

  // Timers.
  TimerQueueKind timerQueue = TimerQueueKind::Wheel;
  Milliseconds timerGranularity = 1;           // the wheel's slot width
  ITimerQueueMonitor* timerMonitor = nullptr;  // not owned; outlives the endpoint

  // Socket (requested; the OS may grant less).
  int socketReceiveBufferSize = 4 << 20;
  int socketSendBufferSize = 4 << 20;

  // Batched socket I/O (Linux; elsewhere one datagram per system call whatever these say). The
  // engine still handles every datagram on its own; these change only how many one system call
  // carries. See UdpSocket/DatagramBatch.h.
  bool batchedIo = true;            // recvmmsg, and sendmmsg of what one engine call produced
  bool segmentationOffload = true;  // UDP_SEGMENT (GSO) for runs to one peer; needs batchedIo
  bool receiveOffload = true;       // UDP_GRO; needs batchedIo
};

// Throws std::invalid_argument naming the option that is out of range (e.g. keepaliveInterval >=
// idleTimeout, maxDatagramSize outside [kHelloSize, 65507], receiveWindow < maxMessageSize + 8).
// Returns the options with the 0 defaults filled in.
EndpointOptions ValidateOptions(EndpointOptions options);

}  // namespace timerwheel::rudp
