// The transport benchmark's measurements: wall-clock stamps, CPU time, resident memory and
// percentiles. Linux only (getrusage, pthread CPU clocks, /proc).
#pragma once

#include <pthread.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace timerwheel::perf {

using Clock = std::chrono::steady_clock;

// Microseconds on Clock (steady): a stamp that a message carries to its receiver in this process.
std::uint64_t NowMicroseconds();
double ProcessCpuSeconds();
double ThreadCpuSeconds(pthread_t thread);
std::size_t ResidentBytes();

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
  std::size_t count = 0;
};

Percentiles ComputePercentiles(std::vector<double> values);

}  // namespace timerwheel::perf
