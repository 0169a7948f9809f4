// The side-by-side timer benchmark: every implementation, the same workloads, one run, one
// machine. Prints a table per workload (median ns/op of repeated runs, min-max, ratio to the
// heap), writes them as CSV and plots the scaling curves with gnuplot.
//
// Usage: TimerWheelBenchmark [--quick] [--targets] [--results DIR]   (--targets: only W1-W5)
//        TimerWheelBenchmark --workload W1..W5 --implementation NAME [--live N] [--operations N]
// The second form runs one target workload once on one implementation and prints its units, ns
// and checksum: tools/count-instructions runs it under callgrind for instructions per unit.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Adapters/AsioSteadyTimerAdapter.h"
#include "Adapters/FloorWheelAdapter.h"
#include "Adapters/LibeventAdapter.h"
#include "Adapters/StdBaselineAdapters.h"
#include "Adapters/TimerWheelAdapter.h"
#include "TargetWorkloads.h"
#include "TimerQueue/ThreadedTimerQueue.h"
#include "Workloads.h"

using namespace timerwheel;
using namespace timerwheel::perf;

namespace {

template <class AdapterT>
struct Named {
  using Adapter = AdapterT;
  const char* name;
};

// Every implementation, in table order; the heap first, as the reference for the ratios.
template <class Function>
void ForEachImplementation(Function&& function) {
  function(Named<HeapAdapter>{"heap"});
  function(Named<WheelAdapter>{"wheel"});
  function(Named<WheelInterfaceAdapter>{"wheel via ITimerQueue&"});
  function(Named<AsioSteadyTimerAdapter>{"asio steady_timer"});
  function(Named<LibeventAdapter>{"libevent evtimer"});
  function(Named<LazyPriorityQueueAdapter>{"priority_queue lazy"});
  function(Named<MultimapAdapter>{"multimap"});
}

// The implementations of the target tables (issue 15), the floor first as the reference.
template <class Function>
void ForEachTargetImplementation(Function&& function) {
  function(Named<FloorAdapter>{"floor"});
  function(Named<WheelAdapter>{"wheel"});
  function(Named<HeapAdapter>{"heap"});
  function(Named<WheelInterfaceAdapter>{"wheel via ITimerQueue&"});
}

// Target workload `name` (W1..W5) on Adapter; `live` is used by W3-W5.
template <class Adapter>
TargetResult RunTarget(const std::string& name, std::size_t live, std::size_t operations) {
  if (name == "W1") return W1ArmCancel<Adapter>(operations);
  if (name == "W2") return W2Rearm<Adapter>(operations);
  if (name == "W3") return W3CancelRearm<Adapter>(live, operations);
  if (name == "W4") return W4ArmFire<Adapter>(live, operations);
  if (name == "W5") return W5RetransmitMix<Adapter>(live, operations);
  throw std::invalid_argument("unknown workload " + name + " (W1..W5)");
}

// The inverse of Count: the number at the end of an operation name such as "live timers 10k".
std::size_t CountFrom(const std::string& text) {
  char* end = nullptr;
  const std::size_t n = std::strtoull(text.c_str() + text.find_first_of("0123456789"), &end, 10);
  return *end == 'M' ? n * 1'000'000 : *end == 'k' ? n * 1'000 : n;
}

std::string Count(std::size_t n) {
  if (n >= 1'000'000 && n % 1'000'000 == 0) return std::to_string(n / 1'000'000) + "M";
  if (n >= 1'000 && n % 1'000 == 0) return std::to_string(n / 1'000) + "k";
  return std::to_string(n);
}

struct Row {
  std::string workload, operation, implementation;
  double median, min, max;
  std::uint64_t checksum;
};

class Report {
 public:
  explicit Report(int repeats) : m_repeats(repeats) {}

  // Runs `measure` `repeats` times (0: the report's default) and records median, min and max.
  void Measure(const std::string& workload, const std::string& operation,
               const char* implementation, const std::function<double(std::uint64_t&)>& measure,
               int repeats = 0) {
    std::fprintf(stderr, "  %-34s %-24s\r", operation.c_str(), implementation);
    std::vector<double> values;
    std::uint64_t checksum = 0;
    for (int r = 0; r < (repeats > 0 ? repeats : m_repeats); ++r)
      values.push_back(measure(checksum));
    std::sort(values.begin(), values.end());
    m_rows.push_back({workload, operation, implementation, values[values.size() / 2],
                      values.front(), values.back(), checksum});
  }

  void Skip(const std::string& workload, const std::string& operation, const char* implementation) {
    m_rows.push_back({workload, operation, implementation, -1, -1, -1, 0});
  }

  // Prints the rows of `workload`, grouped by operation, with the ratio to the first row of each
  // operation (the heap; the floor in the target tables): of the medians, or with `byMinimum` of
  // the minima (the figure least disturbed by other work on a shared machine).
  void Print(const std::string& workload, const char* unit, bool showChecksum = false,
             bool byMinimum = false) const {
    std::printf("\n== %s\n", workload.c_str());
    std::string operation;
    double reference = 0;
    for (const Row& row : m_rows) {
      if (row.workload != workload) continue;
      const double value = byMinimum ? row.min : row.median;
      if (row.operation != operation) {
        operation = row.operation;
        reference = value;
        std::printf("%-34s %-24s %10s %21s %8s%s\n", operation.c_str(), "", unit,
                    byMinimum ? "median - max" : "min - max",
                    byMinimum ? ("x " + row.implementation).c_str() : "x heap",
                    showChecksum ? "   checksum" : "");
      }
      if (row.median < 0) {
        std::printf("%-34s %-24s %10s\n", "", row.implementation.c_str(), "n/a");
        continue;
      }
      std::printf("%-34s %-24s %10.1f %10.1f - %-8.1f %8.2f", "", row.implementation.c_str(), value,
                  byMinimum ? row.median : row.min, row.max,
                  reference > 0 ? value / reference : 0.0);
      if (showChecksum) std::printf("   %llu", static_cast<unsigned long long>(row.checksum));
      std::printf("\n");
    }
    std::fflush(stdout);
  }

  void WriteCsv(const std::string& path) const {
    std::ofstream out(path);
    out << "workload,operation,implementation,median,min,max,checksum\n";
    for (const Row& row : m_rows) {
      out << '"' << row.workload << "\",\"" << row.operation << "\",\"" << row.implementation
          << "\"," << row.median << ',' << row.min << ',' << row.max << ',' << row.checksum << '\n';
    }
  }

  // One gnuplot data block per implementation (in table order): x from the operation's name
  // ("live timers 10k" -> 10000) and the median.
  void WriteSeries(const std::string& workload, const std::string& path) const {
    std::vector<std::string> implementations;
    for (const Row& row : m_rows) {
      if (row.workload == workload && std::find(implementations.begin(), implementations.end(),
                                                row.implementation) == implementations.end()) {
        implementations.push_back(row.implementation);
      }
    }
    std::ofstream out(path);
    for (const std::string& implementation : implementations) {
      out << '"' << implementation << "\"\n";
      for (const Row& row : m_rows) {
        if (row.workload == workload && row.implementation == implementation && row.median >= 0) {
          out << CountFrom(row.operation) << ' ' << row.median << '\n';
        }
      }
      out << "\n\n";
    }
  }

 private:
  int m_repeats;
  std::vector<Row> m_rows;
};

// Bytes the allocator hands out per live timer (records, heap or slots, handles), measured.
template <class MakeQueue>
double BytesPerTimer(std::size_t timers, MakeQueue makeQueue) {
  struct Never final : ITimer {
    void OnTimer(UserData) override {}
  } never;
  const auto before = mallinfo2().uordblks;
  {
    auto queue = makeQueue();
    std::vector<TimerHandle> handles(timers);
    for (std::size_t i = 0; i < timers; ++i) {
      handles[i] = queue->CreateTimer();
      queue->SetTimer(handles[i], never, static_cast<Milliseconds>(1000 + i % 50'000), i);
    }
    const auto after = mallinfo2().uordblks;
    const double handleBytes = static_cast<double>(timers * sizeof(TimerHandle));
    return (static_cast<double>(after - before) - handleBytes) / static_cast<double>(timers);
  }
}

// 5. Set + cancel pairs through ThreadedTimerQueue (system clock, timers never fire), from 1 or
// 2 threads, each on its own 1,000 timers. Nanoseconds per operation across all threads.
double ThreadedSetCancel(IManageTimerQueue& queue, DispatchPolicy policy, int threads,
                         std::size_t pairs) {
  struct Never final : ITimer {
    void OnTimer(UserData) override {}
  } never;
  ThreadedTimerQueueOptions options;
  options.dispatchPolicy = policy;
  ThreadedTimerQueue driver(queue, options);
  std::vector<std::vector<TimerHandle>> handles(threads, std::vector<TimerHandle>(1000));
  for (auto& set : handles) {
    for (auto& handle : set) handle = driver.CreateTimer();
  }
  const auto start = BenchClock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (std::size_t i = 0; i < pairs; ++i) {
        driver.SetTimer(handles[t][i % 1000], never, static_cast<Milliseconds>(30'000 + i % 1000),
                        i);
        driver.CancelTimer(handles[t][i % 1000]);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  const double result = NanosecondsPer(BenchClock::now() - start, 2 * pairs * threads);
  for (auto& set : handles) {
    for (auto& handle : set) driver.DestroyTimer(handle);
  }
  return result;
}

}  // namespace

// The single-run form: one target workload on one implementation, once.
int RunOne(const std::string& workload, const std::string& implementation, std::size_t live,
           std::size_t operations) {
  bool found = false;
  ForEachTargetImplementation([&](auto named) {
    using Adapter = typename decltype(named)::Adapter;
    if (implementation != named.name) return;
    found = true;
    const TargetResult result = RunTarget<Adapter>(workload, live, operations);
    std::printf("%s %s live %zu: units %llu ns %.2f checksum %llu\n", workload.c_str(), named.name,
                live, static_cast<unsigned long long>(result.units), result.nanoseconds,
                static_cast<unsigned long long>(result.checksum));
  });
  if (!found) {
    std::fprintf(stderr, "unknown implementation '%s' (floor, wheel, heap, ",
                 implementation.c_str());
    std::fprintf(stderr, "'wheel via ITimerQueue&')\n");
    return 2;
  }
  return 0;
}

int main(int argc, char** argv) {
  bool quick = false;
  bool targetsOnly = false;
  std::string results = "Perf/results";
  std::string workload, implementation;
  std::size_t live = 10'000, operations = 1'000'000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--targets") == 0) {
      targetsOnly = true;
    } else if (std::strcmp(argv[i], "--results") == 0 && i + 1 < argc) {
      results = argv[++i];
    } else if (std::strcmp(argv[i], "--workload") == 0 && i + 1 < argc) {
      workload = argv[++i];
    } else if (std::strcmp(argv[i], "--implementation") == 0 && i + 1 < argc) {
      implementation = argv[++i];
    } else if (std::strcmp(argv[i], "--live") == 0 && i + 1 < argc) {
      live = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--operations") == 0 && i + 1 < argc) {
      operations = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--quick] [--targets] [--results DIR]\n"
          "       %s --workload W1..W5 --implementation NAME [--live N] [--operations N]\n",
          argv[0], argv[0]);
      return 2;
    }
  }
  if (!workload.empty()) {
    if (live == 0 || operations == 0) {
      std::fprintf(stderr, "--live and --operations must be positive\n");
      return 2;
    }
    try {
      return RunOne(workload, implementation, live, operations);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "%s\n", error.what());
      return 2;
    }
  }
  // Keep freed memory in the process, so that no implementation pays the page faults of the
  // one measured before it.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const int repeats = quick ? 1 : 3;
  const std::size_t scale = quick ? 10 : 1;  // operations are divided by this in --quick
  Report report(repeats);
  std::printf(
      "TimerWheel side-by-side benchmark%s: median of %d runs, ns per operation unless said\n",
      quick ? " (--quick: smaller sizes, one run)" : "", repeats);

  // 0. The targets (issue 15): W1-W5 against the floor, minimum of 7 runs.
  const std::string w0 = "0. targets: W1-W5 against the floor (minimum of " +
                         std::to_string(quick ? 1 : 7) + " runs; ns per unit)";
  std::fprintf(stderr, "%s\n", w0.c_str());
  struct Target {
    const char* workload;
    const char* operation;
    std::size_t live, operations;
  };
  std::vector<Target> targets = {
      {"W1", "W1 hot arm+cancel, one timer (pair)", 1, 2'000'000},
      {"W2", "W2 hot re-arm, pending (re-arm)", 1, 2'000'000},
      {"W3", "W3 cancel+re-arm random, 100k (pair)", 100'000, 1'000'000},
      {"W3", "W3 cancel+re-arm random, 1M (pair)", 1'000'000, 1'000'000},
      {"W4", "W4 arm+fire, 10k live (fired)", 10'000, 1'000'000},
      {"W5", "W5 retransmit mix, 1k (op)", 1'000, 2'000'000},
      // Fewer operations as N grows: at 1M live about 4,000 timers fire (and are re-armed) per
      // millisecond of virtual time, so most units there are firings.
      {"W5", "W5 retransmit mix, 100k (op)", 100'000, 500'000},
      {"W5", "W5 retransmit mix, 1M (op)", 1'000'000, 200'000},
  };
  if (quick) {
    targets.erase(std::remove_if(targets.begin(), targets.end(),
                                 [](const Target& t) { return t.live == 1'000'000; }),
                  targets.end());
  }
  for (const Target& target : targets) {
    ForEachTargetImplementation([&](auto implementation) {
      using Adapter = typename decltype(implementation)::Adapter;
      report.Measure(
          w0, target.operation, implementation.name,
          [&](std::uint64_t& checksum) {
            const TargetResult result =
                RunTarget<Adapter>(target.workload, target.live, target.operations / scale);
            checksum = result.checksum;
            return result.nanoseconds;
          },
          quick ? 1 : 7);
    });
  }
  report.Print(w0, "ns", /*showChecksum=*/true, /*byMinimum=*/true);
  if (targetsOnly) {
    const std::string command = "mkdir -p '" + results + "'";
    if (std::system(command.c_str()) != 0) return 1;
    report.WriteCsv(results + "/timer-targets.csv");
    std::printf("CSV: %s/timer-targets.csv\n", results.c_str());
    return 0;
  }

  // 1. The classic operation set.
  const std::string w1 = "1. classic operation set, 100,000 timers, timeouts i % 4000 ms";
  std::fprintf(stderr, "%s\n", w1.c_str());
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    const std::size_t n = 100'000 / scale;
    report.Measure(w1, "create", implementation.name,
                   [&](std::uint64_t&) { return CreateTimers<Adapter>(n); });
  });
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    report.Measure(w1, "set the same timer", implementation.name,
                   [&](std::uint64_t&) { return SetRoundRobin<Adapter>(1, 1'000'000 / scale); });
  });
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    report.Measure(w1, "set 1,000 timers round-robin", implementation.name,
                   [&](std::uint64_t&) { return SetRoundRobin<Adapter>(1000, 1'000'000 / scale); });
  });
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    report.Measure(
        w1, "1,000 timers x 100 equal deadlines", implementation.name,
        [&](std::uint64_t&) { return SetEqualDeadlines<Adapter>(1000, 100 / (quick ? 10 : 1)); });
  });
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    if constexpr (Adapter::kVirtualTime) {
      report.Measure(
          w1, "set 100,000 then drain (per timer)", implementation.name,
          [&](std::uint64_t& checksum) { return SetAndDrain<Adapter>(100'000 / scale, checksum); });
    } else {
      report.Skip(w1, "set 100,000 then drain (per timer)", implementation.name);
    }
  });
  report.Print(w1, "ns/op");

  // 2. Retransmit-style scaling.
  const std::string w2 =
      "2. retransmit-style: re-arm 90%, cancel+re-arm 9%, fire 1%, by live timers";
  std::fprintf(stderr, "%s\n", w2.c_str());
  std::vector<std::size_t> sizes = {1'000, 10'000, 100'000, 1'000'000, 10'000'000};
  if (quick) sizes = {1'000, 10'000, 100'000};
  for (std::size_t live : sizes) {
    ForEachImplementation([&](auto implementation) {
      using Adapter = typename decltype(implementation)::Adapter;
      const std::string operation = "live timers " + Count(live);
      // At 10M only the O(1)/O(log n) queues of this library: the others take minutes there.
      const bool ours =
          std::is_same_v<Adapter, HeapAdapter> || std::is_same_v<Adapter, WheelAdapter>;
      if (live >= 10'000'000 && !ours) {
        report.Skip(w2, operation, implementation.name);
        return;
      }
      report.Measure(w2, operation, implementation.name, [&](std::uint64_t& fired) {
        return Retransmit<Adapter>(live, 2'000'000 / scale, fired);
      });
    });
  }
  report.Print(w2, "ns/op");

  // 3. Pairs.
  const std::string w3 = "3. arm+cancel and arm+fire pairs (ns per pair)";
  std::fprintf(stderr, "%s\n", w3.c_str());
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    report.Measure(w3, "hot arm+cancel, same timer", implementation.name,
                   [&](std::uint64_t&) { return HotArmCancel<Adapter>(2'000'000 / scale); });
  });
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    const std::size_t live = quick ? 100'000 : 1'000'000;
    report.Measure(
        w3, "cold cancel+re-arm among " + Count(live), implementation.name,
        [&](std::uint64_t&) { return ColdCancelRearm<Adapter>(live, 1'000'000 / scale); });
  });
  ForEachImplementation([&](auto implementation) {
    using Adapter = typename decltype(implementation)::Adapter;
    report.Measure(w3, "arm+fire with 10k live", implementation.name, [&](std::uint64_t& checksum) {
      return ArmAndFire<Adapter>(10'000, 1'000'000 / scale, checksum);
    });
  });
  report.Print(w3, "ns/pair");

  // 4. Protocol mix: run time by work units, virtual time fixed.
  const Ticks virtualMilliseconds = quick ? 2'000 : 10'000;
  const std::string w4 = "4. protocol mix over " + std::to_string(virtualMilliseconds / 1000) +
                         " s of virtual time: run time (ms) by work units (5 timers each)";
  std::fprintf(stderr, "%s\n", w4.c_str());
  std::vector<std::size_t> units = {100, 300, 1'000, 3'000, 10'000, 30'000};
  if (quick) units = {100, 1'000};
  for (std::size_t u : units) {
    ForEachImplementation([&](auto implementation) {
      using Adapter = typename decltype(implementation)::Adapter;
      const std::string operation = "work units " + Count(u);
      if constexpr (Adapter::kVirtualTime) {
        report.Measure(w4, operation, implementation.name, [&](std::uint64_t& checksum) {
          return ProtocolMix<Adapter>(u, virtualMilliseconds, checksum);
        });
      } else {
        report.Skip(w4, operation, implementation.name);
      }
    });
  }
  report.Print(w4, "ms", /*showChecksum=*/true);

  // 5. Threaded dispatch: set+cancel throughput through ThreadedTimerQueue.
  const std::string w5 =
      "5. set+cancel through ThreadedTimerQueue (system clock), ns per operation";
  std::fprintf(stderr, "%s\n", w5.c_str());
  for (int threads : {1, 2}) {
    for (DispatchPolicy policy : {DispatchPolicy::WithoutLock, DispatchPolicy::WithLockHeld}) {
      const std::string operation =
          std::to_string(threads) + " thread" + (threads > 1 ? "s" : "") +
          (policy == DispatchPolicy::WithoutLock ? ", without lock" : ", lock held");
      const std::size_t pairs = 500'000 / scale;
      report.Measure(w5, operation, "heap", [&](std::uint64_t&) {
        TimerQueue queue;
        return ThreadedSetCancel(queue, policy, threads, pairs);
      });
      report.Measure(w5, operation, "wheel", [&](std::uint64_t&) {
        TimerWheel queue;
        return ThreadedSetCancel(queue, policy, threads, pairs);
      });
    }
  }
  report.Print(w5, "ns/op");

  // Memory per live timer, measured from the allocator.
  const std::size_t memoryTimers = quick ? 100'000 : 1'000'000;
  std::printf(
      "\n== memory: bytes per live timer with %s timers set (allocator, handles excluded)\n",
      Count(memoryTimers).c_str());
  std::printf("heap  %6.1f\n",
              BytesPerTimer(memoryTimers, [] { return std::make_unique<TimerQueue>(); }));
  std::printf("wheel %6.1f\n",
              BytesPerTimer(memoryTimers, [] { return std::make_unique<TimerWheel>(); }));

  // Files: CSV of every row, data series and plots of the two scaling curves.
  std::string command = "mkdir -p '" + results + "'";
  if (std::system(command.c_str()) != 0) return 1;
  report.WriteCsv(results + "/timer-benchmark.csv");
  report.WriteSeries(w2, results + "/retransmit-scaling.dat");
  report.WriteSeries(w4, results + "/protocol-mix.dat");
  std::ofstream plot(results + "/plots.gnuplot");
  plot << "set terminal pngcairo size 900,560 noenhanced\nset logscale xy\nset grid\nset key left "
          "top\n"
          "set output '"
       << results
       << "/retransmit-scaling.png'\n"
          "set title 'Retransmit-style workload: cost per operation by live timers'\n"
          "set xlabel 'live timers'\nset ylabel 'ns per operation'\n"
          "plot for [i=0:6] '"
       << results
       << "/retransmit-scaling.dat' index i using 1:2 with linespoints title columnheader(1)\n"
          "set output '"
       << results
       << "/protocol-mix.png'\n"
          "set title 'Protocol mix: run time by work units (fixed virtual time)'\n"
          "set xlabel 'work units (5 timers each)'\nset ylabel 'run time, ms'\n"
          "plot for [i=0:6] '"
       << results
       << "/protocol-mix.dat' index i using 1:2 with linespoints title columnheader(1)\n";
  plot.close();
  command = "gnuplot '" + results + "/plots.gnuplot' 2>/dev/null";
  if (std::system(command.c_str()) == 0) {
    std::printf("\nplots: %s/retransmit-scaling.png, %s/protocol-mix.png\n", results.c_str(),
                results.c_str());
  } else {
    std::printf("\ngnuplot not found or failed: plots not made (data in %s)\n", results.c_str());
  }
  std::printf("CSV: %s/timer-benchmark.csv\n", results.c_str());
  return 0;
}
