// The latency workload: 64-byte messages at 100/s through the relay (10 ms each way, `loss` per
// direction); one-way latency percentiles measured at the server.
#pragma once

#include <cstdint>
#include <string>

#include "TransportBenchmark/Measure.h"
#include "TransportBenchmark/Paths.h"

namespace timerwheel::perf {

struct LatencyRow {
  std::string transport;
  double loss = 0;
  Percentiles latencyMs;
  std::uint64_t messages = 0;
  std::uint64_t retransmissions = 0;
  std::int64_t spurious = -1;
  double wirePerAppByte = 0;
  // Both ends' CPU (the process's, less the relay thread's) per MB of messages delivered: at
  // 6.4 KB/s mostly the cost of being awake (timers, ACKs), which encryption adds to.
  double cpuMsPerMB = 0;
};

LatencyRow RunLatency(Kind kind, double loss, std::uint64_t seed, double seconds,
                      const ReliableUdpVariant& variant = {});

}  // namespace timerwheel::perf
