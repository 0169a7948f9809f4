// The transport benchmark's hostile part over real loopback sockets (issue 14): a server Endpoint
// on its own io thread, a legitimate client running 64-byte round trips, and a SocketAttacker in
// a thread of its own sending one attack at about 1 MB/s. Per attack, beside the unattacked run
// of the same invocation: the legitimate round trip's p50/p99, the server thread's CPU per attack
// datagram against a normal datagram's, and the server's memory and table sizes.
#pragma once

#include "TransportBenchmark/Settings.h"

namespace timerwheel::perf {

// Prints the tables and writes hostile-sockets.csv into settings.results.
void RunHostileSocketTable(const Settings& settings);

}  // namespace timerwheel::perf
