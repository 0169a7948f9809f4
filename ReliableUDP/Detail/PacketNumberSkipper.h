// Packet numbers a connection never sends, so that a peer acknowledging packets it never received
// (an optimistic ACK, RFC 9000 21.4) gives itself away.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// Hands out packet numbers in order, now and then leaving one out. Where: a gap drawn uniformly
// from [1, 2 x mean] packets by a generator seeded with a secret, so the peer cannot predict it;
// the mean starts at kFirstMeanGap and doubles after each skip up to kMaxMeanGap. Early skips
// catch a peer that cheats from the start; later ones are rare, so a long transfer pays almost
// nothing (each gap costs the peer one ACK range while it remembers it, and one immediate ACK).
// The last kRemembered skipped numbers are remembered: an ACK range covering one proves the peer
// lies about what it received.
//
// Not thread-safe (one connection's state). Next and Covers are O(1); nothing allocates.
class PacketNumberSkipper {
 public:
  static constexpr std::uint64_t kFirstMeanGap = 32;
  static constexpr std::uint64_t kMaxMeanGap = 1024;
  static constexpr std::size_t kRemembered = 8;

  explicit PacketNumberSkipper(std::uint64_t seed) noexcept;

  // The number for the next packet sent; every number below it was sent or skipped.
  PacketNumber Current() const noexcept { return m_next; }
  // Current() was used: moves to the next number, stepping over it if it is to be skipped.
  void Advance() noexcept;
  // [smallest, largest] holds a remembered skipped number.
  bool Covers(PacketNumber smallest, PacketNumber largest) const noexcept;
  std::uint64_t SkippedCount() const noexcept { return m_skippedCount; }

 private:
  std::uint64_t Random() noexcept;  // splitmix64
  void ScheduleSkip() noexcept;

  // A remembered skipped number, from its low 32 bits: it is less than kRemembered + 1 gaps of
  // at most 2 x kMaxMeanGap below m_next, far closer than 2^32.
  PacketNumber Skipped(std::size_t index) const noexcept {
    return m_next -
           static_cast<std::uint32_t>(static_cast<std::uint32_t>(m_next) - m_skipped[index]);
  }

  std::uint64_t m_state;
  PacketNumber m_next = 0;
  PacketNumber m_nextSkip = 0;
  std::uint64_t m_skippedCount = 0;
  // The low 32 bits of the last kRemembered skipped numbers (every idle connection has these).
  std::array<std::uint32_t, kRemembered> m_skipped{};
  std::uint32_t m_meanGap = kFirstMeanGap;
};

}  // namespace timerwheel::rudp::detail
