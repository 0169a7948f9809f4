// The many-connections workload: `count` ReliableUDP connections (clients in a child process) to
// one server socket with the wheel or the heap as its timer queue; the server's CPU, memory per
// connection, timer firings and latency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ReliableUDP/EndpointOptions.h"
#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {

// The client side, run in the child process (TransportBenchmark --clients ...): `count`
// connections to 127.0.0.1:port, each sending `rate` messages per second (0: idle) for `seconds`,
// with the server's keepalive interval and idle timeout (from `liveness`).
int RunClients(std::uint16_t port, std::size_t count, double rate, double seconds,
               const rudp::EndpointOptions& liveness);

struct ManyRow {
  std::string queue;
  std::size_t connections = 0;
  double rate = 0;  // messages per second per connection
  double cpuPercent = 0;
  double bytesPerConnection = 0;     // heap in use (mallinfo2), per connection
  double residentPerConnection = 0;  // growth of the resident set, per connection
  double timerFiringsPerSecond = 0;
  std::uint64_t messages = 0;  // delivered to the server's application in the window
  double cpuMicrosecondsPerMessage = 0;
  Percentiles latencyMs;
  unsigned serverThreads = 1;    // io threads running the server (and its shards)
  double messagesPerSecond = 0;  // delivered in the window
  double lockWaitPercent = 0;    // time waiting for a shard's lock or turn, % of server CPU
  double clientCpuSeconds = 0;   // the clients' child process, over its whole life
  double clientSeconds = 0;      // ... which lasted this long
};

// `server` is the server endpoint's starting options (the socket path's, for the loopback table;
// its keepalive interval and idle timeout are the clients' too).
// `serverThreads` io threads run the server, whose endpoint has as many shards.
ManyRow RunMany(rudp::TimerQueueKind queueKind, std::size_t count, double rate, double window,
                const rudp::EndpointOptions& server = {}, unsigned serverThreads = 1);

// One row alone, for instruction counts (TransportBenchmark --many-server ...: run it under
// `valgrind --tool=callgrind --instr-atstart=no`, which then counts the server process's
// instructions over the window alone; the clients' child process runs natively). `path` is
// "batched" (the default socket path) or "unbatched". Prints the row and the messages delivered;
// returns the exit code.
int RunManyServer(std::size_t count, double rate, double window, const std::string& path);

}  // namespace timerwheel::perf
