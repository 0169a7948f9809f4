// The transport benchmark's tables: runs each workload over its grid and prints the table, writes
// the CSV, the gnuplot data and the plot into settings.results.
#pragma once

#include <vector>

#include "TransportBenchmark/Settings.h"

namespace timerwheel::perf {

void RunLatencyTable(const Settings& settings, const std::vector<double>& losses);
void RunBulkTable(const Settings& settings, const std::vector<double>& losses);
void RunManyTable(const Settings& settings);
void RunScalingTable(const Settings& settings);
void RunLoopbackTable(const Settings& settings);  // LoopbackReport.cpp
void RunSharingTable(const Settings& settings);   // SharingReport.cpp

}  // namespace timerwheel::perf
