#include "TransportBenchmark/LatencyWorkload.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {

LatencyRow RunLatency(Kind kind, double loss, std::uint64_t seed, double seconds,
                      const ReliableUdpVariant& variant) {
  constexpr std::size_t kMessageSize = 64;
  constexpr int kRate = 100;  // messages per second
  LatencyRow row;
  row.transport = RowName(kind, variant);
  row.loss = loss;
  auto transport = MakeTransport(kind, variant);
  std::mutex mutex;
  std::vector<double> latencies;
  const std::uint16_t serverPort =
      transport->StartServer([&](const std::uint8_t* data, std::size_t size) {
        if (size < 8) return;
        std::uint64_t stamp = 0;
        std::memcpy(&stamp, data, 8);
        const double ms = static_cast<double>(NowMicroseconds() - stamp) / 1000.0;
        std::lock_guard<std::mutex> lock(mutex);
        latencies.push_back(ms);
      });
  std::unique_ptr<RelayThread> relay;
  std::uint16_t port = serverPort;
  if (kind != Kind::Tcp) {
    relay = std::make_unique<RelayThread>(serverPort, PathProfile(loss), PathProfile(loss), seed);
    port = relay->Port();
  }
  transport->Connect(port);
  const double cpuBefore = ProcessCpuSeconds() - (relay ? relay->CpuSeconds() : 0);
  const auto count = static_cast<std::uint64_t>(seconds * kRate);
  std::uint8_t message[kMessageSize] = {};
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < count; ++i) {
    std::this_thread::sleep_until(start + std::chrono::microseconds(i * 1'000'000 / kRate));
    const std::uint64_t stamp = NowMicroseconds();
    std::memcpy(message, &stamp, 8);
    std::memcpy(message + 8, &i, 8);
    if (!transport->Send(message, kMessageSize)) break;
  }
  transport->Flush(60'000);
  const double cpu = ProcessCpuSeconds() - (relay ? relay->CpuSeconds() : 0) - cpuBefore;
  const TransportCounters counters = transport->ClientCounters();
  transport->Stop();
  relay.reset();
  {
    std::lock_guard<std::mutex> lock(mutex);
    row.latencyMs = ComputePercentiles(latencies);
    row.messages = latencies.size();
  }
  const double megabytes = static_cast<double>(row.messages * kMessageSize) / 1e6;
  row.cpuMsPerMB = megabytes > 0 ? cpu * 1000.0 / megabytes : 0;
  row.retransmissions = counters.retransmissions;
  row.spurious = counters.spuriousRetransmissions;
  row.wirePerAppByte =
      static_cast<double>(counters.wireBytesSent) / static_cast<double>(count * kMessageSize);
  return row;
}

}  // namespace timerwheel::perf
