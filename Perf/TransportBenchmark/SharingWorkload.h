// The sharing workload (issue 17): two ReliableUDP bulk flows, each from a client endpoint of its
// own, to one server through one relay whose rate-capped link (and its one drop-tail queue) both
// share; the second flow starts a few seconds after the first. Per-flow goodput per second, how
// soon the two converge, Jain's fairness index, the share of the cap they use and the queue's
// drops.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ReliableUDP/EndpointOptions.h"

namespace timerwheel::perf {

struct SharingFlow {
  std::string controller;           // "Bbr", "NewReno" or "none"
  std::vector<double> goodputMBps;  // application MB/s in each second of the run (0 before it)
  double sharedMBps = 0;            // mean goodput while both flows ran
  std::uint64_t retransmissions = 0;
  std::string congestionState;  // the client's controller at the end
};

struct SharingRow {
  std::string path;  // e.g. "50 Mbit/s, 64 KB"
  std::uint64_t seed = 0;
  double secondStartsAt = 0;  // seconds after the first flow started
  double seconds = 0;         // the whole run, from the first flow's start
  std::array<SharingFlow, 2> flows;
  // Seconds from the second flow's start until the two are first within 20 % of each other
  // (the smaller at least 0.8 of the larger, over a 1 s window sliding in 100 ms steps), and
  // until they stay so to the end of the run (-1: not reached).
  double firstWithinSeconds = -1;
  double convergedSeconds = -1;
  double jain = 0;               // over the two flows' mean goodputs while both ran
  double shareOfCap = 0;         // both flows' goodput while both ran over the cap (6.25 MB/s)
  std::uint64_t queueDrops = 0;  // at the relay's queue while both ran
  std::uint64_t datagramsToServer = 0;  // arrived at the relay towards the server, same period
};

// `first` starts at once, `second` `secondStartsAt` seconds later; both stop at `seconds`. The
// relay: 10 ms each way, 50 Mbit/s towards the server through a `queueBytes` drop-tail queue.
SharingRow RunSharing(rudp::CongestionControl first, rudp::CongestionControl second,
                      std::size_t queueBytes, std::uint64_t seed, double secondStartsAt,
                      double seconds);

// The cap RunSharing puts on the link towards the server, bytes per second.
inline constexpr double kSharingCapBytesPerSecond = 50e6 / 8;

}  // namespace timerwheel::perf
