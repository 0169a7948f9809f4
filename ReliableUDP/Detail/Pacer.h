// A token-bucket pacer that spreads a congestion window over the round trip (RFC 9002 7.7), or
// sends at a congestion controller's pacing rate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// Rate = 1.25 * window / RTT, so that pacing does not itself limit throughput, or the rate a
// model-based controller gives (the *AtRate calls, bytes per second); the bucket holds
// max(10 * mds, rate * 4 ms) bytes, so a 1 ms-granularity timer sustains the rate. It starts full:
// the initial window may go out as one burst. The window and RTT (or the rate) are passed to every
// call (they belong to the congestion controller and the RTT estimator); tokens earned so far
// accrue at the rate given, so refill before either changes.
// Not thread-safe; O(1), no allocation.
class Pacer {
 public:
  Pacer(std::size_t maxDatagramSize, std::uint64_t window, Microseconds rtt) noexcept;

  // Adds the tokens earned up to `now` (never moves back in time).
  void Refill(Microseconds now, std::uint64_t window, Microseconds rtt) noexcept;
  void RefillAtRate(Microseconds now, double bytesPerSecond) noexcept;
  // A packet of `bytes` left, after a Refill at its send time (tokens may go negative: a probe
  // or a full-size packet on an almost empty bucket borrows from the future).
  void OnPacketSent(std::uint32_t bytes) noexcept;
  // The earliest time a full-size packet may go (now if it may go now).
  Microseconds NextSendTime(Microseconds now, std::uint64_t window,
                            Microseconds rtt) const noexcept;
  Microseconds NextSendTimeAtRate(Microseconds now, double bytesPerSecond) const noexcept;

 private:
  // A rate as bytes per time: `bytes` every `per` microseconds (kept apart, and multiplied
  // before dividing, so that whole-byte results come out exact).
  struct Rate {
    double bytes;
    double per;
  };
  static Rate FromWindow(std::uint64_t window, Microseconds rtt) noexcept;
  static Rate FromBytesPerSecond(double bytesPerSecond) noexcept;
  void RefillAt(Microseconds now, Rate rate) noexcept;
  Microseconds NextSendTimeAt(Microseconds now, Rate rate) const noexcept;
  double Capacity(Rate rate) const noexcept;
  double TokensAt(Microseconds now, Rate rate) const noexcept;

  std::size_t m_maxDatagramSize;
  double m_tokens = 0;  // bytes
  Microseconds m_updated = 0;
};

}  // namespace timerwheel::rudp::detail
