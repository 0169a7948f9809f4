// The transport benchmark's send-buffer rows (part of "hostile"): what the order in which a peer
// acknowledges packets costs the sender's bookkeeping, per acknowledged packet, by send-buffer
// size.
#pragma once

#include "TransportBenchmark/Settings.h"

namespace timerwheel::perf {

// Prints the table (no CSV: a handful of rows).
void RunAckOrderTable(const Settings& settings);

}  // namespace timerwheel::perf
