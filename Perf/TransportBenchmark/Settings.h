// What a run of the transport benchmark measures: its command line, parsed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace timerwheel::perf {

struct Settings {
  std::string results = "Perf/results";
  int seeds = 1;
  std::vector<double> losses{0.0, 0.01, 0.05, 0.10};
  double latencySeconds = 6;
  double bulkSeconds = 3;
  double manyWindow = 16;
  std::vector<std::size_t> idleCounts{1000, 10000};
  std::size_t activeCount = 10000;
  // The many part's timer queues (--queue wheel|heap|both): true is the wheel, false the heap.
  std::vector<bool> manyQueues{true, false};
  // The many part's keepalive interval on both sides, ms (--keepalive; the idle timeout is
  // twice it, the defaults' ratio). 0: the defaults (15 s and 30 s).
  std::uint32_t keepaliveMs = 0;
  // The many part's server socket receive buffer, MiB; 0: sized for the connection count.
  std::uint32_t serverReceiveBufferMiB = 0;
  // The scaling part (issue 18): this many connections, each sending scalingRate 64-byte
  // messages per second, to a server run by 1 and then 2 io threads (as many shards).
  // 0 connections: the part is skipped.
  std::size_t scalingConnections = 1000;
  double scalingRate = 50;
  // ReliableUDP's congestion controllers in the bulk table (--cc bbr|newreno|none, repeatable);
  // empty: all three.
  std::vector<std::string> controllers;
  std::uint64_t loopbackMegabytes = 200;  // per configuration of the loopback table
  std::vector<std::string> only;          // empty: every part
  // The sharing part: the second flow starts this long after the first, both stop at
  // sharingSeconds (0, as --quick sets it: the part is skipped).
  double sharingSecondStartsAt = 3;
  double sharingSeconds = 10;
  bool niceAttacker = false;  // --attacker-nice: the hostile part's attacker thread at nice 19
  // --encrypt off|on|both: ReliableUDP's latency and bulk rows in plaintext, encrypted (issue
  // 20: a server key pair, the client pinning it), or each row both ways, side by side.
  std::vector<bool> encryption{false};
  // --io batched|unbatched|both: ReliableUDP's latency and bulk rows over the batched socket path
  // (the default), one system call per datagram (issue 19's "batching adds no latency"), or both.
  std::vector<bool> batching{true};
  bool Runs(const std::string& part) const {
    return only.empty() || std::find(only.begin(), only.end(), part) != only.end();
  }
};

// Reads the options (see Main.cpp's usage) into `settings`; false, having printed the usage to
// stderr, if they are not understood.
bool ParseSettings(int argc, char** argv, Settings& settings);

}  // namespace timerwheel::perf
