#include "TransportBenchmark/Settings.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace timerwheel::perf {
namespace {

// An option that picks one of two modes or both, e.g. "--io batched|unbatched|both": `modes`
// gets the mode named, or both in the order given. False, having said why, for another word.
bool ParseOneOrBoth(const char* option, const std::string& word,
                    const std::pair<const char*, bool>& first,
                    const std::pair<const char*, bool>& second, std::vector<bool>& modes) {
  if (word == first.first) {
    modes = {first.second};
  } else if (word == second.first) {
    modes = {second.second};
  } else if (word == "both") {
    modes = {first.second, second.second};
  } else {
    std::fprintf(stderr, "%s takes %s, %s or both, not '%s'\n", option, first.first, second.first,
                 word.c_str());
    return false;
  }
  return true;
}

}  // namespace

bool ParseSettings(int argc, char** argv, Settings& settings) {
  bool lossesGiven = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      settings.losses = {0.0, 0.05};
      settings.latencySeconds = 1;
      settings.bulkSeconds = 0.5;
      settings.manyWindow = 2;
      settings.idleCounts = {200};
      settings.activeCount = 200;
      settings.loopbackMegabytes = 20;
      settings.sharingSeconds = 0;
      settings.scalingConnections = 200;
      settings.scalingRate = 20;
    } else if (arg == "--full") {
      settings.seeds = 3;
      settings.latencySeconds = 30;
      settings.bulkSeconds = 10;
      settings.manyWindow = 60;
      settings.idleCounts = {1000, 10000, 100000};
      settings.loopbackMegabytes = 1000;
      settings.sharingSeconds = 15;
    } else if (arg == "--idle" && i + 1 < argc) {
      // Only these idle counts (repeatable), and no active run: one point of the grid.
      if (settings.activeCount != 0) settings.idleCounts.clear();
      settings.activeCount = 0;
      settings.idleCounts.push_back(static_cast<std::size_t>(std::atoll(argv[++i])));
    } else if (arg == "--active" && i + 1 < argc) {
      // Only this many active connections (1 message a second each), and no idle run.
      const long long count = std::atoll(argv[++i]);
      if (count < 1 || count > 10'000'000) {
        std::fprintf(stderr, "--active takes 1 to 10000000 connections, not '%s'\n", argv[i]);
        return false;
      }
      settings.idleCounts.clear();
      settings.activeCount = static_cast<std::size_t>(count);
    } else if (arg == "--window" && i + 1 < argc) {
      // The many-connections window, seconds (after --quick or --full, which set their own):
      // e.g. --idle 1000000 --window 600 holds a million connections for ten minutes.
      settings.manyWindow = std::atof(argv[++i]);
      if (!(settings.manyWindow >= 1 && settings.manyWindow <= 3600)) {
        std::fprintf(stderr, "--window takes 1 to 3600 seconds, not '%s'\n", argv[i]);
        return false;
      }
    } else if (arg == "--queue" && i + 1 < argc) {
      if (!ParseOneOrBoth("--queue", argv[++i], {"wheel", true}, {"heap", false},
                          settings.manyQueues)) {
        return false;
      }
    } else if (arg == "--keepalive" && i + 1 < argc) {
      const long long ms = std::atoll(argv[++i]);
      // The idle timeout, twice it, must fit the options' 32-bit milliseconds.
      if (ms < 100 || ms > 1'000'000'000) {
        std::fprintf(stderr, "--keepalive takes 100 to 1000000000 ms, not '%s'\n", argv[i]);
        return false;
      }
      settings.keepaliveMs = static_cast<std::uint32_t>(ms);
    } else if (arg == "--server-buffer" && i + 1 < argc) {
      const long long mib = std::atoll(argv[++i]);
      if (mib < 1 || mib > 1024) {
        std::fprintf(stderr, "--server-buffer takes 1 to 1024 MiB, not '%s'\n", argv[i]);
        return false;
      }
      settings.serverReceiveBufferMiB = static_cast<std::uint32_t>(mib);
    } else if (arg == "--seeds" && i + 1 < argc) {
      // After --quick or --full, which set their own.
      settings.seeds = std::atoi(argv[++i]);
      if (settings.seeds < 1 || settings.seeds > 100) {
        std::fprintf(stderr, "--seeds takes 1 to 100, not '%s'\n", argv[i]);
        return false;
      }
    } else if (arg == "--loss" && i + 1 < argc) {
      // Only these loss levels, in percent (repeatable; after --quick, which sets its own).
      const double percent = std::atof(argv[++i]);
      if (!(percent >= 0 && percent < 100)) {
        std::fprintf(stderr, "--loss takes a percentage in [0, 100), not '%s'\n", argv[i]);
        return false;
      }
      if (!lossesGiven) settings.losses.clear();
      lossesGiven = true;
      settings.losses.push_back(percent / 100);
    } else if (arg == "--results" && i + 1 < argc) {
      settings.results = argv[++i];
    } else if (arg == "--hostile") {
      settings.only.push_back("hostile");
    } else if (arg == "--attacker-nice") {
      settings.niceAttacker = true;
    } else if (arg == "--cc" && i + 1 < argc) {
      const std::string controller = argv[++i];
      if (controller != "bbr" && controller != "newreno" && controller != "none") {
        std::fprintf(stderr, "--cc takes bbr, newreno or none, not '%s'\n", controller.c_str());
        return false;
      }
      settings.controllers.push_back(controller);
    } else if (arg == "--encrypt" && i + 1 < argc) {
      if (!ParseOneOrBoth("--encrypt", argv[++i], {"off", false}, {"on", true},
                          settings.encryption)) {
        return false;
      }
    } else if (arg == "--io" && i + 1 < argc) {
      if (!ParseOneOrBoth("--io", argv[++i], {"batched", true}, {"unbatched", false},
                          settings.batching)) {
        return false;
      }
    } else if (arg == "--only" && i + 1 < argc) {
      settings.only.push_back(argv[++i]);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--quick | --full] [--seeds N] [--loss PERCENT]... [--results DIR] "
          "[--only latency|bulk|sharing|many|scaling|hostile|loopback]... [--idle N]... "
          "[--window S] [--queue wheel|heap|both] [--keepalive MS] [--server-buffer MIB] "
          "[--hostile] [--attacker-nice] "
          "[--cc bbr|newreno|none]... [--encrypt off|on|both] [--io batched|unbatched|both]\n",
          argv[0]);
      return false;
    }
  }
  return true;
}

}  // namespace timerwheel::perf
