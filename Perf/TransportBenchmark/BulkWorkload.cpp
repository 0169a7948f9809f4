#include "TransportBenchmark/BulkWorkload.h"

#include <atomic>
#include <memory>
#include <vector>

#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {

BulkRow RunBulk(Kind kind, const relay::ImpairmentProfile& path, const std::string& pathName,
                std::uint64_t seed, double seconds, bool encrypted) {
  constexpr std::size_t kMessageSize = 1200;
  BulkRow row;
  row.transport = RowName(kind, encrypted && IsReliableUdp(kind));
  row.path = pathName;
  row.loss = path.loss;
  auto transport = MakeTransport(kind, encrypted);
  std::atomic<std::uint64_t> delivered{0};
  const std::uint16_t serverPort =
      transport->StartServer([&](const std::uint8_t*, std::size_t size) { delivered += size; });
  std::unique_ptr<RelayThread> relay;
  std::uint16_t port = serverPort;
  relay::ImpairmentProfile reverse = path;
  reverse.rateBitsPerSecond = 0;  // ACKs are not rate-limited
  reverse.queueLimitBytes = 0;
  if (kind != Kind::Tcp) {
    relay = std::make_unique<RelayThread>(serverPort, path, reverse, seed);
    port = relay->Port();
  }
  transport->Connect(port);
  std::vector<std::uint8_t> message(kMessageSize, 0x5A);
  const double cpuBefore = ProcessCpuSeconds() - (relay ? relay->CpuSeconds() : 0);
  const auto start = Clock::now();
  const auto stopSending = start + std::chrono::duration<double>(seconds);
  std::uint64_t sent = 0;
  while (Clock::now() < stopSending) {
    if (!transport->Send(message.data(), message.size())) break;
    sent += message.size();
  }
  transport->Flush(120'000);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = ProcessCpuSeconds() - (relay ? relay->CpuSeconds() : 0) - cpuBefore;
  const TransportCounters counters = transport->ClientCounters();
  if (relay) {
    row.queueDrops = relay->ToServer().droppedQueue;
    row.datagramsToServer = relay->ToServer().in;
  }
  row.congestionState = counters.congestionState;
  transport->Stop();
  relay.reset();
  const double megabytes = static_cast<double>(delivered.load()) / 1e6;
  row.goodputMBps = megabytes / elapsed;
  row.wirePerAppByte =
      sent > 0 ? static_cast<double>(counters.wireBytesSent) / static_cast<double>(sent) : 0;
  row.cpuMsPerMB = megabytes > 0 ? cpu * 1000.0 / megabytes : 0;
  row.retransmissions = counters.retransmissions;
  return row;
}

}  // namespace timerwheel::perf
