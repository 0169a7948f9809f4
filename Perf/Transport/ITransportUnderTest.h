// What the transport benchmark needs of each transport it compares: a server and a client in
// this process, sending messages reliably and in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace timerwheel::perf {

// Counted by the client (the sending side of every workload).
struct TransportCounters {
  std::uint64_t wireBytesSent =
      0;                          // datagram payload bytes (UDP transports), or bytes written (TCP)
  std::uint64_t packetsSent = 0;  // datagrams (UDP transports); 0 for TCP
  std::uint64_t retransmissions = 0;  // datagrams that carried resent data, if the transport says
  std::int64_t spuriousRetransmissions = -1;  // -1: the transport cannot tell
  std::uint64_t minRttMicroseconds = 0;       // 0: the transport does not say
  // The congestion controller's state, one line (empty: the transport does not report it).
  std::string congestionState;
};

// One transport under test. A benchmark run: StartServer, Connect, any number of Send, Stop.
// Each implementation runs its own threads (an event loop for the server and one for the client
// is the usual shape) and must be safe to Send from the benchmark's thread.
class ITransportUnderTest {
 public:
  using MessageHandler = std::function<void(const std::uint8_t* data, std::size_t size)>;

  virtual ~ITransportUnderTest() = default;
  virtual std::string Name() const = 0;

  // Starts a server on 127.0.0.1 (port 0: any) that calls onMessage, on one of its own threads,
  // for each message received, in order. Returns the port it listens on.
  virtual std::uint16_t StartServer(MessageHandler onMessage) = 0;
  // Connects the client to 127.0.0.1:port (the server, or a relay in front of it) and returns once
  // the connection is established; throws std::runtime_error if it cannot within 10 s.
  virtual void Connect(std::uint16_t port) = 0;
  // Queues one message (1 byte to 64 KB); blocks while the transport's send queue is full, so a
  // fast sender is paced by the transport (back-pressure). Returns false if the connection failed.
  virtual bool Send(const std::uint8_t* data, std::size_t size) = 0;
  // Blocks until every message sent so far was delivered to the server's handler, or `timeoutMs`.
  virtual bool Flush(int timeoutMs) = 0;
  virtual TransportCounters ClientCounters() = 0;
  // The client connection's latest RTT sample, microseconds (0: none yet, or the transport does
  // not say). Between Connect and Stop, from any thread, also while another thread is in Send:
  // the bulk workload samples it from a thread of its own for the RTT percentiles under load.
  virtual std::uint64_t LatestRttMicroseconds() { return 0; }
  // Closes both ends and joins the threads. Idempotent.
  virtual void Stop() = 0;
};

}  // namespace timerwheel::perf
