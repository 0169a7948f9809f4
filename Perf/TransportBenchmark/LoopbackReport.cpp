// The loopback table: bulk over plain loopback by I/O configuration, CPU per megabyte per end,
// and the server's CPU per message with 1,000 connections sending 64-byte messages at 100/s.
#include <cstdio>
#include <fstream>
#include <utility>
#include <vector>

#include "TransportBenchmark/LoopbackBulkWorkload.h"
#include "TransportBenchmark/ManyConnectionsWorkload.h"
#include "TransportBenchmark/Report.h"

namespace timerwheel::perf {

void RunLoopbackTable(const Settings& settings) {
  std::printf("\n=== bulk over loopback, no relay, one connection, NewReno with pacing, %llu MB\n",
              static_cast<unsigned long long>(settings.loopbackMegabytes));
  std::printf("%-22s %8s %10s %10s %10s %10s %10s %10s %9s\n", "I/O", "MB/s", "snd ms/MB",
              "snd user", "snd sys", "rcv ms/MB", "rcv user", "rcv sys", "datagrams");
  std::ofstream csv(settings.results + "/transport-loopback.csv");
  csv << "configuration,goodput_MBps,sender_cpu_ms_per_MB,sender_user_s,sender_sys_s,"
         "receiver_cpu_ms_per_MB,receiver_user_s,receiver_sys_s,datagrams_sent,retransmissions\n";
  std::vector<std::pair<const char*, rudp::EndpointOptions>> configurations;
  configurations.emplace_back("default", rudp::EndpointOptions{});
  for (const auto& [name, options] : configurations) {
    const LoopbackBulkRow row = RunLoopbackBulk(name, options, settings.loopbackMegabytes);
    std::printf("%-22s %8.1f %10.2f %10.3f %10.3f %10.2f %10.3f %10.3f %9llu\n", name,
                row.goodputMBps, row.CpuMsPerMB(row.sender), row.sender.userSeconds,
                row.sender.systemSeconds, row.CpuMsPerMB(row.receiver), row.receiver.userSeconds,
                row.receiver.systemSeconds, static_cast<unsigned long long>(row.datagramsSent));
    std::fflush(stdout);
    csv << name << ',' << row.goodputMBps << ',' << row.CpuMsPerMB(row.sender) << ','
        << row.sender.userSeconds << ',' << row.sender.systemSeconds << ','
        << row.CpuMsPerMB(row.receiver) << ',' << row.receiver.userSeconds << ','
        << row.receiver.systemSeconds << ',' << row.datagramsSent << ',' << row.retransmissions
        << '\n';
  }
  std::printf("\n=== 1,000 connections x 64-byte messages at 100/s to one server (wheel)\n");
  std::printf("%8s %8s %12s %9s\n", "msg/s", "CPU %", "CPU us/msg", "p99 ms");
  const ManyRow many = RunMany(rudp::TimerQueueKind::Wheel, 1000, 100, settings.manyWindow / 2);
  std::printf("%8.0f %8.2f %12.2f %9.2f\n", many.rate * static_cast<double>(many.connections),
              many.cpuPercent, many.cpuMicrosecondsPerMessage, many.latencyMs.p99);
}

}  // namespace timerwheel::perf
