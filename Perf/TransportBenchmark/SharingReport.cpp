// The sharing table (issue 17): pairs of flows through one capped link, per queue and seed.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "TransportBenchmark/Report.h"
#include "TransportBenchmark/SharingWorkload.h"

namespace timerwheel::perf {

void RunSharingTable(const Settings& settings) {
  std::printf(
      "\n=== sharing: two flows to one server through one relay, 10 ms each way, 50 Mbit/s "
      "towards the server (one queue for both); the 2nd starts %.0f s after the 1st, both stop "
      "at %.0f s\n",
      settings.sharingSecondStartsAt, settings.sharingSeconds);
  std::printf("%-18s %-18s %4s %8s %8s %7s %7s %9s %9s %8s\n", "1st + 2nd", "path", "seed",
              "1st MB/s", "2nd MB/s", "of cap", "Jain", "within s", "stays s", "qdrops");
  std::ofstream csv(settings.results + "/transport-sharing.csv");
  csv << "first,second,path,seed,first_MBps,second_MBps,share_of_cap,jain,first_within_20pct_s,"
         "stays_within_20pct_s,queue_drops,datagrams_to_server\n";
  using Cc = rudp::CongestionControl;
  // Two Bbr flows; and Bbr against NewReno, each order (the newcomer and the incumbent).
  const std::pair<Cc, Cc> pairs[] = {
      {Cc::Bbr, Cc::Bbr}, {Cc::NewReno, Cc::Bbr}, {Cc::Bbr, Cc::NewReno}};
  for (const std::size_t queue : {std::size_t{64} << 10, std::size_t{1} << 20}) {
    for (const auto& [first, second] : pairs) {
      for (int seed = 1; seed <= settings.seeds; ++seed) {
        const SharingRow row = RunSharing(first, second, queue, static_cast<std::uint64_t>(seed),
                                          settings.sharingSecondStartsAt, settings.sharingSeconds);
        const std::string names = row.flows[0].controller + " + " + row.flows[1].controller;
        const double dropShare =
            row.datagramsToServer > 0
                ? static_cast<double>(row.queueDrops) / static_cast<double>(row.datagramsToServer)
                : 0.0;
        std::printf("%-18s %-18s %4d %8.2f %8.2f %6.0f%% %7.3f %9.1f %9.1f %7.2f%%\n",
                    names.c_str(), row.path.c_str(), seed, row.flows[0].sharedMBps,
                    row.flows[1].sharedMBps, 100 * row.shareOfCap, row.jain, row.firstWithinSeconds,
                    row.convergedSeconds, 100 * dropShare);
        for (const SharingFlow& flow : row.flows) {
          std::printf("    %-8s MB/s each second:", flow.controller.c_str());
          for (const double mbps : flow.goodputMBps) std::printf(" %.2f", mbps);
          std::printf("\n    %-8s retx %llu, %s\n", flow.controller.c_str(),
                      static_cast<unsigned long long>(flow.retransmissions),
                      flow.congestionState.c_str());
        }
        if (first != second) {
          const double share =
              row.flows[first == Cc::Bbr ? 0 : 1].sharedMBps * 1e6 / kSharingCapBytesPerSecond;
          std::printf("    Bbr's share of the cap while both ran: %.0f%%\n", 100 * share);
        }
        std::fflush(stdout);
        csv << row.flows[0].controller << ',' << row.flows[1].controller << ',' << row.path << ','
            << seed << ',' << row.flows[0].sharedMBps << ',' << row.flows[1].sharedMBps << ','
            << row.shareOfCap << ',' << row.jain << ',' << row.firstWithinSeconds << ','
            << row.convergedSeconds << ',' << row.queueDrops << ',' << row.datagramsToServer
            << '\n';
      }
    }
  }
}

}  // namespace timerwheel::perf
