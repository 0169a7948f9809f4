// The transport benchmark: ReliableUDP side by side with ENet and TCP, through the impairment
// relay, in one run on one machine; then many connections on one ReliableUDP server socket with
// the TimerWheel and with the TimerQueue as its timer queue.
//
// Usage: TransportBenchmark [--quick | --full] [--seeds N] [--loss PERCENT]... [--results DIR]
//                           [--only latency|bulk|sharing|many|hostile|loopback]... [--idle N]...
//                           [--active N] [--window S] [--queue wheel|heap|both] [--keepalive MS]
//                           [--server-buffer MIB]
//                           [--hostile] [--attacker-nice]
//                           [--cc bbr|newreno|none]... [--encrypt off|on|both]
//                           [--io batched|unbatched|both]
//   (none)   the short form run by tools/bench: every table, one seed, short runs (~4 minutes)
//   --quick  a smoke run for the test command (well under a minute; numbers mean little)
//   --full   the whole grid, 3 seeds per point, longer runs, 100k idle connections
//   --seeds  seeds per point (after --quick or --full, which set theirs)
//   --loss   just these loss levels of the latency and bulk tables, in percent (repeatable)
//   --only   run just these parts (default: all of them; --quick leaves sharing out)
//   sharing  two flows through one capped relay link (Bbr + Bbr, NewReno + Bbr, Bbr + NewReno;
//            64 KB and 1 MB queue): per-flow goodput, convergence, Jain's index (issue 17)
//   --idle   just this many idle connections in the many part (repeatable; no active run)
//   --active just this many active connections (1 message a second each) in the many part, and
//            no idle run (its window is half of --window)
//   --window the many part's measurement window, seconds
//   --queue  the many part's rows with the wheel, the heap (the default: both)
//   --keepalive  the many part's keepalive interval on both sides, ms (the idle timeout twice
//            it; default 15 s and 30 s): what an idle server's load scales with
//   --server-buffer  the many part's server socket receive buffer, MiB (default: 32 bytes per
//            connection, at least 4 MiB; beyond net.core.rmem_max only with CAP_NET_ADMIN)
//   --hostile  just the hostile part (= --only hostile): server CPU per attack datagram, and
//            each attack over loopback sockets beside a legitimate connection
//   --attacker-nice  the hostile part's attacker thread at nice 19 (on a shared machine it then
//            stands more nearly for a host of its own)
//   --cc     ReliableUDP's congestion controllers in the bulk table (repeatable; default all
//            three: bbr, the default, newreno and none, the known-path profile)
//   --encrypt  ReliableUDP's latency and bulk rows through the relay in plaintext (off, the
//            default), encrypted (on: issue 20's AEAD, the server's key pinned by the client), or
//            both, each plaintext row followed by its encrypted twin (CPU ms/MB side by side)
//   --io     ReliableUDP's latency and bulk rows over the batched socket path (the default:
//            recvmmsg/sendmmsg, GSO/GRO), one system call per datagram (unbatched), or both,
//            each batched row followed by its unbatched twin
// Internal: TransportBenchmark --clients <port> <count> <messages-per-second> <seconds>
//   <keepalive-ms> <idle-timeout-ms>
//   (the client side of the many-connections workload, run as a child process so that the
//   server's CPU and memory are measured alone)
// One row: TransportBenchmark --many-server <count> <messages-per-second> <seconds>
// batched|unbatched
//   (the many-connections workload at a fixed offered rate, for callgrind:
//   ManyConnectionsWorkload.h)
//
// Linux only (fork/exec, /proc, getrusage), like TimerWheelBenchmark.
//
// The parts: Settings (the command line), the three workloads (LatencyWorkload, BulkWorkload,
// ManyConnectionsWorkload) over Paths (the transports and the relay) with Measure, and Report
// (the tables, CSV files and plots).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "TransportBenchmark/AckOrderWorkload.h"
#include "TransportBenchmark/HostileSocketWorkload.h"
#include "TransportBenchmark/HostileWorkload.h"
#include "TransportBenchmark/ManyConnectionsWorkload.h"
#include "TransportBenchmark/Report.h"
#include "TransportBenchmark/Settings.h"

using namespace timerwheel::perf;

int main(int argc, char** argv) {
  if (argc == 8 && std::strcmp(argv[1], "--clients") == 0) {
    timerwheel::rudp::EndpointOptions options;
    options.keepaliveInterval = static_cast<std::uint32_t>(std::atoll(argv[6]));
    options.idleTimeout = static_cast<std::uint32_t>(std::atoll(argv[7]));
    return RunClients(static_cast<std::uint16_t>(std::atoi(argv[2])),
                      static_cast<std::size_t>(std::atoll(argv[3])), std::atof(argv[4]),
                      std::atof(argv[5]), options);
  }
  if (argc == 6 && std::strcmp(argv[1], "--many-server") == 0) {
    return RunManyServer(static_cast<std::size_t>(std::atoll(argv[2])), std::atof(argv[3]),
                         std::atof(argv[4]), argv[5]);
  }
  Settings settings;
  if (!ParseSettings(argc, argv, settings)) return 2;
  std::system(("mkdir -p '" + settings.results + "'").c_str());
  const std::vector<double>& losses = settings.losses;

  if (settings.Runs("latency")) RunLatencyTable(settings, losses);
  if (settings.Runs("bulk")) RunBulkTable(settings, losses);
  if (settings.Runs("sharing") && settings.sharingSeconds > 0) RunSharingTable(settings);
  if (settings.Runs("many")) RunManyTable(settings);
  if (settings.Runs("scaling") && settings.scalingConnections > 0) RunScalingTable(settings);
  if (settings.Runs("hostile")) {
    RunHostileTable(settings);
    RunAckOrderTable(settings);
    RunHostileSocketTable(settings);
  }
  if (settings.Runs("loopback")) RunLoopbackTable(settings);
  return 0;
}
