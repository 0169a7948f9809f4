// The bulk workload: 1200-byte messages as fast as the transport takes them, through the relay;
// goodput, wire bytes per application byte and CPU per megabyte.
#pragma once

#include <cstdint>
#include <string>

#include "Relay/ImpairmentProfile.h"
#include "TransportBenchmark/Measure.h"
#include "TransportBenchmark/Paths.h"

namespace timerwheel::perf {

struct BulkRow {
  std::string transport;
  std::string path;
  double loss = 0;
  double goodputMBps = 0;
  double wirePerAppByte = 0;
  double cpuMsPerMB = 0;
  std::uint64_t retransmissions = 0;
  std::uint64_t queueDrops = 0;         // at the relay's rate-limited queue
  std::uint64_t datagramsToServer = 0;  // arrived at the relay towards the server
  std::string congestionState;          // the client's controller at the end (ReliableUDP only)
  // ReliableUDP only: the client connection's latest RTT, sampled every 2 ms while sending (a
  // time-weighted sample of the per-ACK RTTs: under bulk, ACKs come at a steady rate); the
  // percentiles over the whole run and over all but its first second (Startup's queue), and the
  // connection's min RTT at the end. 0 when not measured.
  Percentiles rttMs;
  double rttP99AfterFirstSecondMs = 0;
  double minRttMs = 0;
  // The relay thread's CPU time over the row's wall time (sending and the flush): near 1, the
  // relay, not the transport, would bound the goodput (issue 19). 0 without a relay.
  double relayCpuShare = 0;
};

BulkRow RunBulk(Kind kind, const relay::ImpairmentProfile& path, const std::string& pathName,
                std::uint64_t seed, double seconds, const ReliableUdpVariant& variant = {});

}  // namespace timerwheel::perf
