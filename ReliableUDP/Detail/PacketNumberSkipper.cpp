// PacketNumberSkipper: packet numbers with unpredictable gaps (the optimistic-ACK defence).
#include "ReliableUDP/Detail/PacketNumberSkipper.h"

#include <algorithm>

namespace timerwheel::rudp::detail {

PacketNumberSkipper::PacketNumberSkipper(std::uint64_t seed) noexcept : m_state(seed) {
  ScheduleSkip();
}

std::uint64_t PacketNumberSkipper::Random() noexcept {
  // splitmix64 (Steele, Lea and Flood): the seed is the secret, the sequence only has to look
  // random to a peer that sees where the gaps fell.
  std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void PacketNumberSkipper::ScheduleSkip() noexcept {
  m_nextSkip = m_next + 1 + Random() % (2 * std::uint64_t{m_meanGap});
}

void PacketNumberSkipper::Advance() noexcept {
  ++m_next;
  if (m_next != m_nextSkip) return;
  m_skipped[m_skippedCount % kRemembered] = static_cast<std::uint32_t>(m_next);
  ++m_skippedCount;
  ++m_next;
  m_meanGap = static_cast<std::uint32_t>(std::min(std::uint64_t{m_meanGap} * 2, kMaxMeanGap));
  ScheduleSkip();
}

bool PacketNumberSkipper::Covers(PacketNumber smallest, PacketNumber largest) const noexcept {
  const std::size_t count =
      static_cast<std::size_t>(std::min<std::uint64_t>(m_skippedCount, kRemembered));
  for (std::size_t i = 0; i < count; ++i) {
    const PacketNumber skipped = Skipped(i);
    if (skipped >= smallest && skipped <= largest) return true;
  }
  return false;
}

}  // namespace timerwheel::rudp::detail
