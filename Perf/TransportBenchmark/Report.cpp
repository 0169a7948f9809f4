#include "TransportBenchmark/Report.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "TransportBenchmark/BulkWorkload.h"
#include "TransportBenchmark/LatencyWorkload.h"
#include "TransportBenchmark/ManyConnectionsWorkload.h"

namespace timerwheel::perf {

namespace {

std::string Percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%g%%", fraction * 100);
  return text;
}

// One gnuplot data block per series: "loss% value" lines, the mean over seeds per loss level.
struct Series {
  std::string title;
  std::vector<std::pair<double, std::vector<double>>> points;  // loss -> values (one per seed)
  void Add(double loss, double value) {
    for (auto& point : points) {
      if (point.first == loss) return point.second.push_back(value);
    }
    points.push_back({loss, {value}});
  }
};

// ReliableUDP's rows per kind: each --encrypt mode by each --io mode, plaintext and batched first.
std::vector<ReliableUdpVariant> VariantsOf(const Settings& settings) {
  std::vector<ReliableUdpVariant> variants;
  for (const bool encrypted : settings.encryption) {
    for (const bool batched : settings.batching) variants.push_back({encrypted, batched});
  }
  return variants;
}

void WriteSeries(const std::vector<Series>& series, const std::string& path) {
  std::ofstream out(path);
  for (const Series& one : series) {
    out << '"' << one.title << "\"\n";
    for (const auto& [loss, values] : one.points) {
      double sum = 0;
      for (double value : values) sum += value;
      out << loss * 100 << ' ' << sum / static_cast<double>(values.size()) << '\n';
    }
    out << "\n\n";
  }
}

void Plot(const std::string& results, const std::string& name, const std::string& title,
          const std::string& ylabel, std::size_t seriesCount) {
  const std::string script = results + "/" + name + ".gnuplot";
  {
    std::ofstream plot(script);
    plot << "set terminal pngcairo size 900,560 noenhanced\nset grid\nset key left top\n"
         << "set logscale y\nset xlabel 'loss per direction, %'\nset ylabel '" << ylabel << "'\n"
         << "set title '" << title << "'\nset output '" << results << "/" << name << ".png'\n"
         << "plot for [i=0:" << seriesCount - 1 << "] '" << results << "/" << name
         << ".dat' index i using 1:2 with linespoints title columnheader(1)\n";
  }
  const std::string command = "gnuplot '" + script + "' 2>/dev/null";
  if (std::system(command.c_str()) == 0) {
    std::printf("plot: %s/%s.png\n", results.c_str(), name.c_str());
  } else {
    std::printf("gnuplot not found or failed: %s.png not made\n", name.c_str());
  }
}

rudp::TimerQueueKind QueueKind(bool wheel) {
  return wheel ? rudp::TimerQueueKind::Wheel : rudp::TimerQueueKind::Heap;
}

}  // namespace

void RunLatencyTable(const Settings& settings, const std::vector<double>& losses) {
  std::printf("=== latency: 64-byte messages at 100/s, relay 10 ms each way, loss per direction\n");
  std::printf("%-32s %6s %8s %8s %8s %8s %8s %8s %8s %10s %10s\n", "transport", "loss", "p50 ms",
              "p90 ms", "p99 ms", "max ms", "msgs", "retx", "spurious", "wire/app", "CPU ms/MB");
  std::ofstream latencyCsv(settings.results + "/transport-latency.csv");
  latencyCsv << "transport,loss,seed,p50_ms,p90_ms,p99_ms,max_ms,messages,retransmissions,"
                "spurious,wire_per_app_byte,cpu_ms_per_MB\n";
  auto printLatency = [&](const LatencyRow& row, std::uint64_t seed) {
    std::printf("%-32s %6s %8.2f %8.2f %8.2f %8.2f %8llu %8llu %8lld %10.3f %10.1f\n",
                row.transport.c_str(), Percent(row.loss).c_str(), row.latencyMs.p50,
                row.latencyMs.p90, row.latencyMs.p99, row.latencyMs.max,
                static_cast<unsigned long long>(row.messages),
                static_cast<unsigned long long>(row.retransmissions),
                static_cast<long long>(row.spurious), row.wirePerAppByte, row.cpuMsPerMB);
    std::fflush(stdout);
    latencyCsv << row.transport << ',' << row.loss << ',' << seed << ',' << row.latencyMs.p50 << ','
               << row.latencyMs.p90 << ',' << row.latencyMs.p99 << ',' << row.latencyMs.max << ','
               << row.messages << ',' << row.retransmissions << ',' << row.spurious << ','
               << row.wirePerAppByte << ',' << row.cpuMsPerMB << '\n';
  };
  printLatency(RunLatency(Kind::Tcp, 0, 1, settings.latencySeconds), 1);
  // A p50 and a p99 series per row name (ReliableUDP in each variant, then ENet).
  std::vector<Series> series;
  auto seriesOf = [&series](const std::string& name) -> std::size_t {
    for (std::size_t i = 0; i < series.size(); i += 2) {
      if (series[i].title == name + " p50") return i;
    }
    series.push_back({name + " p50", {}});
    series.push_back({name + " p99", {}});
    return series.size() - 2;
  };
  for (double loss : losses) {
    for (int seed = 1; seed <= settings.seeds; ++seed) {
      std::vector<std::pair<Kind, ReliableUdpVariant>> rows;
      for (const ReliableUdpVariant& variant : VariantsOf(settings))
        rows.emplace_back(Kind::ReliableUdp, variant);
      rows.emplace_back(Kind::Enet, ReliableUdpVariant{});
      for (const auto& [kind, variant] : rows) {
        const LatencyRow row = RunLatency(kind, loss, static_cast<std::uint64_t>(seed),
                                          settings.latencySeconds, variant);
        printLatency(row, static_cast<std::uint64_t>(seed));
        const std::size_t first = seriesOf(row.transport);
        series[first].Add(loss, row.latencyMs.p50);
        series[first + 1].Add(loss, row.latencyMs.p99);
      }
    }
  }
  latencyCsv.close();
  WriteSeries(series, settings.results + "/transport-latency.dat");
  Plot(settings.results, "transport-latency",
       "One-way latency of 64-byte messages at 100/s, 10 ms each way", "latency, ms",
       series.size());
}

void RunBulkTable(const Settings& settings, const std::vector<double>& losses) {
  std::printf(
      "\n=== bulk: 1200-byte messages as fast as the transport takes them, relay 10 ms each "
      "way\n");
  std::printf("%-32s %-22s %6s %10s %10s %10s %8s %8s\n", "transport", "path", "loss", "MB/s",
              "wire/app", "CPU ms/MB", "retx", "qdrops");
  std::ofstream bulkCsv(settings.results + "/transport-bulk.csv");
  bulkCsv << "transport,path,loss,seed,goodput_MBps,wire_per_app_byte,cpu_ms_per_MB,"
             "retransmissions,queue_drops,rtt_p50_ms,rtt_p99_ms,rtt_p99_after_1s_ms,min_rtt_ms,"
             "relay_cpu_share\n";
  auto printBulk = [&](const BulkRow& row, std::uint64_t seed) {
    std::printf("%-32s %-22s %6s %10.2f %10.3f %10.1f %8llu %8llu\n", row.transport.c_str(),
                row.path.c_str(), Percent(row.loss).c_str(), row.goodputMBps, row.wirePerAppByte,
                row.cpuMsPerMB, static_cast<unsigned long long>(row.retransmissions),
                static_cast<unsigned long long>(row.queueDrops));
    std::fflush(stdout);
    if (!row.congestionState.empty()) std::printf("    %s\n", row.congestionState.c_str());
    if (row.relayCpuShare > 0) {
      std::printf("    relay thread: %.0f%% of a core\n", 100.0 * row.relayCpuShare);
    }
    bulkCsv << row.transport << ',' << row.path << ',' << row.loss << ',' << seed << ','
            << row.goodputMBps << ',' << row.wirePerAppByte << ',' << row.cpuMsPerMB << ','
            << row.retransmissions << ',' << row.queueDrops << ',' << row.rttMs.p50 << ','
            << row.rttMs.p99 << ',' << row.rttP99AfterFirstSecondMs << ',' << row.minRttMs << ','
            << row.relayCpuShare << '\n';
  };
  // ReliableUDP's controllers asked for (--cc), then ENet.
  std::vector<Kind> kinds;
  const auto wanted = [&](const char* controller) {
    return settings.controllers.empty() ||
           std::find(settings.controllers.begin(), settings.controllers.end(), controller) !=
               settings.controllers.end();
  };
  if (wanted("bbr")) kinds.push_back(Kind::ReliableUdp);
  if (wanted("newreno")) kinds.push_back(Kind::ReliableUdpNewReno);
  if (wanted("none")) kinds.push_back(Kind::ReliableUdpKnownPath);
  kinds.push_back(Kind::Enet);
  printBulk(RunBulk(Kind::Tcp, PathProfile(0), "loopback", 1, settings.bulkSeconds), 1);
  // Each ReliableUDP kind once per variant (plaintext and batched first), ENet once.
  std::vector<std::pair<Kind, ReliableUdpVariant>> rows;
  for (Kind kind : kinds) {
    if (!IsReliableUdp(kind)) {
      rows.emplace_back(kind, ReliableUdpVariant{});
      continue;
    }
    for (const ReliableUdpVariant& variant : VariantsOf(settings)) rows.emplace_back(kind, variant);
  }
  std::vector<Series> series;
  for (const auto& [kind, variant] : rows) series.push_back({RowName(kind, variant), {}});
  for (double loss : losses) {
    for (int seed = 1; seed <= settings.seeds; ++seed) {
      std::size_t index = 0;
      for (const auto& [kind, variant] : rows) {
        const BulkRow row =
            RunBulk(kind, PathProfile(loss), "10 ms", static_cast<std::uint64_t>(seed),
                    settings.bulkSeconds, variant);
        printBulk(row, static_cast<std::uint64_t>(seed));
        series[index++].Add(loss, row.goodputMBps);
      }
    }
  }
  WriteSeries(series, settings.results + "/transport-goodput.dat");
  Plot(settings.results, "transport-goodput", "Bulk goodput of 1200-byte messages, 10 ms each way",
       "goodput, MB/s", series.size());
  // A real bottleneck: 50 Mbit/s (6.25 MB/s; BDP 125 KB at 20 ms) behind a 64 KB queue (half
  // the BDP) and a deep one (1 MB, 8 BDPs). Queue drops as a share of what reached the relay.
  for (const std::size_t queue : {std::size_t{64} << 10, std::size_t{1} << 20}) {
    relay::ImpairmentProfile capped = PathProfile(0);
    capped.rateBitsPerSecond = 50e6;
    capped.queueLimitBytes = queue;
    const std::string name =
        queue < (1u << 20) ? "10 ms, 50 Mbit/s, 64 KB" : "10 ms, 50 Mbit/s, 1 MB";
    for (int seed = 1; seed <= settings.seeds; ++seed) {
      for (const auto& [kind, variant] : rows) {
        const BulkRow row = RunBulk(kind, capped, name, static_cast<std::uint64_t>(seed),
                                    settings.bulkSeconds, variant);
        printBulk(row, static_cast<std::uint64_t>(seed));
        std::printf("    share of cap %.0f%%, queue drops %.2f%% of datagrams\n",
                    100.0 * row.goodputMBps / 6.25,
                    row.datagramsToServer > 0 ? 100.0 * static_cast<double>(row.queueDrops) /
                                                    static_cast<double>(row.datagramsToServer)
                                              : 0.0);
        if (row.rttMs.count > 0 && row.minRttMs > 0) {
          // The targets: queueing delay at p99 <= 1x the base RTT (64 KB), p99 RTT <= 1.5x the
          // base RTT (1 MB); the base is the connection's min RTT.
          std::printf(
              "    RTT while sending (%zu samples, every 2 ms): p50 %.1f ms, p99 %.1f ms = "
              "%.2fx min RTT %.1f ms (queueing p99 %.1f ms); after the first second p99 %.1f ms "
              "= %.2fx\n",
              row.rttMs.count, row.rttMs.p50, row.rttMs.p99, row.rttMs.p99 / row.minRttMs,
              row.minRttMs, row.rttMs.p99 - row.minRttMs, row.rttP99AfterFirstSecondMs,
              row.rttP99AfterFirstSecondMs / row.minRttMs);
        }
      }
    }
  }
}

void RunManyTable(const Settings& settings) {
  rudp::EndpointOptions server;
  if (settings.keepaliveMs != 0) {
    server.keepaliveInterval = settings.keepaliveMs;
    server.idleTimeout = 2 * settings.keepaliveMs;
  }
  std::printf(
      "\n=== many connections on one server socket (clients in a child process), "
      "keepalive %.1f s, idle timeout %.1f s\n",
      server.keepaliveInterval / 1000.0, server.idleTimeout / 1000.0);
  std::printf("%-6s %8s %8s %8s %12s %12s %12s %12s %9s %9s %13s\n", "queue", "conns", "msg/s",
              "CPU %", "heap B/conn", "RSS B/conn", "timers/s", "CPU us/msg", "p50 ms", "p99 ms",
              "client CPU %");
  std::ofstream manyCsv(settings.results + "/transport-many.csv");
  manyCsv << "queue,connections,rate_per_connection,cpu_percent,heap_bytes_per_connection,"
             "resident_bytes_per_connection,timer_firings_per_second,cpu_us_per_message,p50_ms,"
             "p99_ms\n";
  auto printMany = [&](const ManyRow& row) {
    // The clients' CPU over their whole life (connecting included), on the same cores.
    const double clientPercent =
        row.clientSeconds > 0 ? 100.0 * row.clientCpuSeconds / row.clientSeconds : 0;
    std::printf("%-6s %8zu %8.0f %8.2f %12.0f %12.0f %12.1f %12.1f %9.2f %9.2f %13.1f\n",
                row.queue.c_str(), row.connections, row.rate * static_cast<double>(row.connections),
                row.cpuPercent, row.bytesPerConnection, row.residentPerConnection,
                row.timerFiringsPerSecond, row.cpuMicrosecondsPerMessage, row.latencyMs.p50,
                row.latencyMs.p99, clientPercent);
    std::fflush(stdout);
    manyCsv << row.queue << ',' << row.connections << ',' << row.rate << ',' << row.cpuPercent
            << ',' << row.bytesPerConnection << ',' << row.residentPerConnection << ','
            << row.timerFiringsPerSecond << ',' << row.cpuMicrosecondsPerMessage << ','
            << row.latencyMs.p50 << ',' << row.latencyMs.p99 << '\n';
  };
  // The server's socket receive buffer, sized for the load as a server for this many
  // connections would be: 32 bytes a connection, at least the default 4 MiB. A million
  // connecting in 25 s from the same two cores overflowed 4 MiB as their first keepalive rounds
  // met the last handshakes (Perf/RESULTS.md, issue 18), and each PING lost there is a probe
  // timeout. Beyond net.core.rmem_max only with CAP_NET_ADMIN: each row's connect line says
  // what was granted.
  const auto sizedFor = [&](std::size_t count) {
    rudp::EndpointOptions options = server;
    const std::size_t bytes =
        settings.serverReceiveBufferMiB != 0
            ? std::size_t{settings.serverReceiveBufferMiB} << 20
            : std::max<std::size_t>(static_cast<std::size_t>(server.socketReceiveBufferSize),
                                    count * 32);
    options.socketReceiveBufferSize = static_cast<int>(std::min<std::size_t>(bytes, 1u << 30));
    return options;
  };
  for (std::size_t count : settings.idleCounts) {
    for (const bool wheel : settings.manyQueues) {
      printMany(RunMany(QueueKind(wheel), count, 0, settings.manyWindow, sizedFor(count)));
    }
  }
  if (settings.activeCount == 0) return;
  for (const bool wheel : settings.manyQueues) {
    printMany(RunMany(QueueKind(wheel), settings.activeCount, 1, settings.manyWindow / 2,
                      sizedFor(settings.activeCount)));
  }
}

void RunScalingTable(const Settings& settings) {
  std::printf(
      "\n=== threads: %zu connections at %.0f msg/s each to one server socket run by 1 and by 2 io "
      "threads (as many shards), clients in a child process on the same %u-core machine\n",
      settings.scalingConnections, settings.scalingRate, std::thread::hardware_concurrency());
  std::printf("%7s %9s %9s %8s %11s %11s %8s %8s %14s\n", "threads", "offered", "msg/s", "CPU %",
              "CPU us/msg", "lock wait %", "p50 ms", "p99 ms", "client CPU %");
  std::ofstream csv(settings.results + "/transport-scaling.csv");
  csv << "threads,connections,offered_per_second,delivered_per_second,cpu_percent,"
         "cpu_us_per_message,lock_wait_percent_of_cpu,p50_ms,p99_ms,client_cpu_percent\n";
  for (unsigned threads : {1u, 2u}) {
    const ManyRow row = RunMany(rudp::TimerQueueKind::Wheel, settings.scalingConnections,
                                settings.scalingRate, settings.manyWindow / 2, {}, threads);
    const double offered = settings.scalingRate * static_cast<double>(row.connections);
    const double clientPercent =
        row.clientSeconds > 0 ? 100.0 * row.clientCpuSeconds / row.clientSeconds : 0;
    std::printf("%7u %9.0f %9.0f %8.1f %11.2f %11.2f %8.2f %8.2f %14.1f\n", threads, offered,
                row.messagesPerSecond, row.cpuPercent, row.cpuMicrosecondsPerMessage,
                row.lockWaitPercent, row.latencyMs.p50, row.latencyMs.p99, clientPercent);
    std::fflush(stdout);
    csv << threads << ',' << row.connections << ',' << offered << ',' << row.messagesPerSecond
        << ',' << row.cpuPercent << ',' << row.cpuMicrosecondsPerMessage << ','
        << row.lockWaitPercent << ',' << row.latencyMs.p50 << ',' << row.latencyMs.p99 << ','
        << clientPercent << '\n';
  }
}

}  // namespace timerwheel::perf
