// The loopback bulk workload: one ReliableUDP connection over plain loopback (no relay), each end
// on an io_context thread of its own, so that CPU per megabyte is measured per end, user and
// system apart.
#pragma once

#include <cstdint>
#include <string>

#include "ReliableUDP/EndpointOptions.h"

namespace timerwheel::perf {

struct EndCpu {
  double userSeconds = 0;
  double systemSeconds = 0;
};

struct LoopbackBulkRow {
  std::string configuration;
  double goodputMBps = 0;
  EndCpu sender;    // the sending end's io thread
  EndCpu receiver;  // the receiving end's io thread
  std::uint64_t megabytes = 0;
  std::uint64_t datagramsSent = 0;  // by the sender
  std::uint64_t retransmissions = 0;
  // System calls that moved datagrams, each end (sends + receives), and GSO/GRO use.
  std::uint64_t senderSystemCalls = 0;
  std::uint64_t receiverSystemCalls = 0;
  std::uint64_t segmentedSends = 0;     // by the sender
  std::uint64_t coalescedReceives = 0;  // by the receiver
  double CpuMsPerMB(const EndCpu& end) const {
    return megabytes > 0
               ? (end.userSeconds + end.systemSeconds) * 1000.0 / static_cast<double>(megabytes)
               : 0;
  }
};

// Sends `megabytes` MB as 64 KiB messages (16 outstanding) from a client endpoint to a server
// endpoint, both made with `options`, and measures from the first send to the last byte
// delivered. Throws std::runtime_error if the transfer does not finish within 120 s.
LoopbackBulkRow RunLoopbackBulk(const std::string& configuration,
                                const rudp::EndpointOptions& options, std::uint64_t megabytes);

}  // namespace timerwheel::perf
