#include "TransportBenchmark/BulkWorkload.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {
namespace {

// Samples the client's latest RTT every 2 ms on a thread of its own, from construction to Stop.
class RttSampler {
 public:
  explicit RttSampler(ITransportUnderTest& transport)
      : m_start(Clock::now()), m_thread([this, &transport] { Run(transport); }) {}
  ~RttSampler() { Stop(); }
  RttSampler(const RttSampler&) = delete;
  RttSampler& operator=(const RttSampler&) = delete;

  void Stop() {
    m_stop = true;
    if (m_thread.joinable()) m_thread.join();
  }
  // After Stop: milliseconds, all of them, and those taken after `skip` from the start.
  std::vector<double> Samples(std::chrono::milliseconds skip) const {
    std::vector<double> samples;
    for (const auto& [at, us] : m_samples) {
      if (at >= skip) samples.push_back(static_cast<double>(us) / 1000.0);
    }
    return samples;
  }

 private:
  void Run(ITransportUnderTest& transport) {
    constexpr auto kInterval = std::chrono::milliseconds(2);
    m_samples.reserve(16384);
    for (auto next = m_start + kInterval; !m_stop; next += kInterval) {
      std::this_thread::sleep_until(next);
      const std::uint64_t rtt = transport.LatestRttMicroseconds();
      if (rtt == 0) continue;
      m_samples.emplace_back(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - m_start), rtt);
    }
  }

  const Clock::time_point m_start;
  std::atomic<bool> m_stop{false};
  std::vector<std::pair<std::chrono::milliseconds, std::uint64_t>> m_samples;
  std::thread m_thread;  // last: started once the rest is ready
};

}  // namespace

BulkRow RunBulk(Kind kind, const relay::ImpairmentProfile& path, const std::string& pathName,
                std::uint64_t seed, double seconds, const ReliableUdpVariant& variant) {
  constexpr std::size_t kMessageSize = 1200;
  BulkRow row;
  row.transport = RowName(kind, variant);
  row.path = pathName;
  row.loss = path.loss;
  auto transport = MakeTransport(kind, variant);
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
  const double relayCpuBefore = relay ? relay->CpuSeconds() : 0;
  const double cpuBefore = ProcessCpuSeconds() - relayCpuBefore;
  const auto start = Clock::now();
  const auto stopSending = start + std::chrono::duration<double>(seconds);
  std::uint64_t sent = 0;
  std::unique_ptr<RttSampler> rtt;
  if (IsReliableUdp(kind)) rtt = std::make_unique<RttSampler>(*transport);
  while (Clock::now() < stopSending) {
    if (!transport->Send(message.data(), message.size())) break;
    sent += message.size();
  }
  if (rtt) {
    rtt->Stop();  // while bulk runs: the flush's tail is not part of it
    row.rttMs = ComputePercentiles(rtt->Samples(std::chrono::milliseconds(0)));
    row.rttP99AfterFirstSecondMs =
        ComputePercentiles(rtt->Samples(std::chrono::milliseconds(1000))).p99;
  }
  transport->Flush(120'000);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double relayCpu = relay ? relay->CpuSeconds() - relayCpuBefore : 0;
  const double cpu = ProcessCpuSeconds() - relayCpu - relayCpuBefore - cpuBefore;
  const TransportCounters counters = transport->ClientCounters();
  if (relay) {
    row.relayCpuShare = relayCpu / elapsed;
    row.queueDrops = relay->ToServer().droppedQueue;
    row.datagramsToServer = relay->ToServer().in;
  }
  row.congestionState = counters.congestionState;
  row.minRttMs = static_cast<double>(counters.minRttMicroseconds) / 1000.0;
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
