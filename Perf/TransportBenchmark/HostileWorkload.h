// The transport benchmark's "hostile" part (issue 14): what each attack datagram costs the
// server's CPU, beside what a normal datagram costs, measured on the sans-I/O engine.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "TransportBenchmark/Settings.h"

namespace timerwheel::perf {

struct HostileRow {
  std::string attack;
  std::string bound;             // what holds it
  std::size_t datagrams = 0;     // attack datagrams delivered
  std::size_t bytes = 0;         // their bytes
  double nsPerDatagram = 0;      // server thread CPU per datagram
  double ratio = 0;              // to a normal datagram's CPU (the first row)
  double visitsPerDatagram = 0;  // sent-packet records ACK processing looked at (attacks only)
};

// One row per attack, after the normal datagram's row. Each attack runs on a fresh pair of
// endpoints joined by an in-memory link on a manual clock, so that nothing but the server's
// handling of the datagrams is timed (thread CPU time over `datagrams` deliveries).
std::vector<HostileRow> RunHostileWorkload(std::size_t datagrams);
// Prints the table and writes hostile.csv into settings.results.
void RunHostileTable(const Settings& settings);

}  // namespace timerwheel::perf
