// A send buffer filled and sent as 1,200-byte packets, then acknowledged in an order a peer
// chooses: in order; or every other packet first, then the rest in order (each of those fills
// the hole at the front of the acknowledged set, which a set erased at its front paid for with a
// move of every range behind it). Timed on the sans-I/O SendBuffer alone, thread CPU time.
#include "TransportBenchmark/AckOrderWorkload.h"

#include <cstdint>
#include <cstdio>
#include <vector>

#include "ReliableUDP/Detail/ChunkPool.h"
#include "ReliableUDP/Detail/SendBuffer.h"
#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {
namespace {

constexpr std::size_t kPacket = 1200;

enum class Order { InOrder, EveryOtherFirst };

// Thread CPU ns per acknowledged packet of the timed phase: all of them in order, or (every other
// packet acknowledged first, untimed) the rest in order.
double NsPerAck(std::size_t bufferBytes, Order order) {
  rudp::detail::ChunkPool pool;
  double total = 0;
  std::size_t timed = 0;
  // Rounds until at least 200,000 acknowledgements are timed: small buffers repeat.
  while (timed < 200'000) {
    rudp::detail::SendBuffer buffer(pool, bufferBytes);
    static const std::vector<std::uint8_t> payload(kPacket, 0x5A);
    while (buffer.FreeSpace() >= kPacket) buffer.Append(payload.data(), kPacket);
    std::vector<std::uint64_t> offsets;
    rudp::detail::SendBuffer::Range range;
    while (buffer.NextToSend(kPacket, ~std::uint64_t{0}, range)) {
      buffer.OnSent(range.offset, range.size);
      offsets.push_back(range.offset);
    }
    std::size_t step = 1;
    if (order == Order::EveryOtherFirst) {
      for (std::size_t i = 1; i < offsets.size(); i += 2) buffer.OnAcked(offsets[i], kPacket);
      step = 2;
    }
    const double before = ThreadCpuSeconds(pthread_self());
    std::size_t acks = 0;
    for (std::size_t i = 0; i < offsets.size(); i += step, ++acks) {
      buffer.OnAcked(offsets[i], kPacket);
    }
    total += ThreadCpuSeconds(pthread_self()) - before;
    timed += acks;
    if (!buffer.AllAcked()) std::printf("ack order: not every byte acknowledged\n");
  }
  return total * 1e9 / static_cast<double>(timed);
}

}  // namespace

void RunAckOrderTable(const Settings& settings) {
  std::printf(
      "\n## Hostile peer: the order of acknowledgements, sender CPU per acknowledged packet\n\n");
  std::printf("| send buffer | in order (ns) | every other first, then the rest in order (ns) |\n");
  std::printf("| ---: | ---: | ---: |\n");
  const std::vector<std::size_t> sizes =
      settings.latencySeconds < 2 ? std::vector<std::size_t>{2u << 20, 16u << 20}
                                  : std::vector<std::size_t>{2u << 20, 16u << 20, 64u << 20};
  for (const std::size_t size : sizes) {
    std::printf("| %zu MiB | %.0f | %.0f |\n", size >> 20, NsPerAck(size, Order::InOrder),
                NsPerAck(size, Order::EveryOtherFirst));
  }
  std::fflush(stdout);
}

}  // namespace timerwheel::perf
