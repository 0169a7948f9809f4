// The loopback table: bulk over plain loopback by I/O configuration, and with encryption on and
// off side by side (issue 20), CPU per megabyte per end; and the server's CPU per message with
// 1,000 connections sending 64-byte messages at 100/s.
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
  std::printf("%-20s %7s %9s %8s %8s %9s %8s %8s %9s %9s %8s %8s\n", "socket path", "MB/s",
              "snd ms/MB", "snd usr", "snd sys", "rcv ms/MB", "rcv usr", "rcv sys", "snd calls",
              "rcv calls", "GSO msgs", "GRO msgs");
  std::ofstream csv(settings.results + "/transport-loopback.csv");
  csv << "configuration,goodput_MBps,sender_cpu_ms_per_MB,sender_user_s,sender_sys_s,"
         "receiver_cpu_ms_per_MB,receiver_user_s,receiver_sys_s,sender_system_calls,"
         "receiver_system_calls,segmented_sends,coalesced_receives,datagrams_sent,"
         "retransmissions\n";
  rudp::EndpointOptions unbatched;
  unbatched.batchedIo = false;
  rudp::EndpointOptions batchedOnly;
  batchedOnly.segmentationOffload = false;
  batchedOnly.receiveOffload = false;
  const rudp::EndpointOptions batchedOffload;  // the default
  const std::vector<std::pair<const char*, rudp::EndpointOptions>> configurations{
      {"one per call", unbatched}, {"batched", batchedOnly}, {"batched + GSO/GRO", batchedOffload}};
  // The default socket path with encryption: both ends get both keys (the server uses its secret
  // key, the client the pinned public one), so one options struct serves both.
  rudp::EndpointOptions encrypted;
  const rudp::ServerKeyPair key = rudp::MakeServerKeyPair();
  encrypted.serverSecretKey = key.secretKey;
  encrypted.serverPublicKey = key.publicKey;
  auto bulkConfigurations = configurations;
  bulkConfigurations.emplace_back("GSO/GRO, encrypted", encrypted);
  // What a peer without AES instructions gets.
  rudp::EndpointOptions chacha = encrypted;
  chacha.allowAes256Gcm = false;
  bulkConfigurations.emplace_back("GSO/GRO, ChaCha20", chacha);
  for (const auto& [name, options] : bulkConfigurations) {
    const LoopbackBulkRow row = RunLoopbackBulk(name, options, settings.loopbackMegabytes);
    std::printf("%-20s %7.1f %9.2f %8.3f %8.3f %9.2f %8.3f %8.3f %9llu %9llu %8llu %8llu\n", name,
                row.goodputMBps, row.CpuMsPerMB(row.sender), row.sender.userSeconds,
                row.sender.systemSeconds, row.CpuMsPerMB(row.receiver), row.receiver.userSeconds,
                row.receiver.systemSeconds, static_cast<unsigned long long>(row.senderSystemCalls),
                static_cast<unsigned long long>(row.receiverSystemCalls),
                static_cast<unsigned long long>(row.segmentedSends),
                static_cast<unsigned long long>(row.coalescedReceives));
    std::fflush(stdout);
    csv << name << ',' << row.goodputMBps << ',' << row.CpuMsPerMB(row.sender) << ','
        << row.sender.userSeconds << ',' << row.sender.systemSeconds << ','
        << row.CpuMsPerMB(row.receiver) << ',' << row.receiver.userSeconds << ','
        << row.receiver.systemSeconds << ',' << row.senderSystemCalls << ','
        << row.receiverSystemCalls << ',' << row.segmentedSends << ',' << row.coalescedReceives
        << ',' << row.datagramsSent << ',' << row.retransmissions << '\n';
  }
  std::printf(
      "\n=== 1,000 connections x 64-byte messages at 100/s to one server (wheel; clients in a "
      "child process)\n");
  std::printf("%-20s %9s %8s %11s %9s\n", "server socket path", "msg/s", "CPU %", "CPU us/msg",
              "p99 ms");
  for (const auto& [name, options] : configurations) {
    if (&options == &configurations[1].second) continue;  // the two ends of the range suffice
    const ManyRow many =
        RunMany(rudp::TimerQueueKind::Wheel, 1000, 100, settings.manyWindow / 2, options);
    const double delivered = many.cpuMicrosecondsPerMessage > 0
                                 ? many.cpuPercent / 100.0 * 1e6 / many.cpuMicrosecondsPerMessage
                                 : 0;
    std::printf("%-20s %9.0f %8.2f %11.2f %9.2f\n", name, delivered, many.cpuPercent,
                many.cpuMicrosecondsPerMessage, many.latencyMs.p99);
    std::fflush(stdout);
  }
}

}  // namespace timerwheel::perf
