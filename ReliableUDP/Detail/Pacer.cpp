// Pacer: RFC 9002 7.7's token bucket (see Pacer.h).
#include "ReliableUDP/Detail/Pacer.h"

#include <algorithm>
#include <cmath>

namespace timerwheel::rudp::detail {
namespace {

// RFC 9002 7.7: the pacer sends at 1.25 times cwnd per RTT so that it does not itself limit
// throughput; the burst covers 4 ms so a 1 ms-granularity timer can keep up. Slow start uses the
// same gain: neither RFC 9002 7.7 nor RFC 9406 (which only has a paced sender use L = infinity)
// asks for another; the 2x some stacks pace slow start at is Linux's tcp_pacing_ss_ratio.
constexpr double kPacingGain = 1.25;
constexpr double kBurstMicroseconds = 4000.0;
constexpr std::size_t kBurstPackets = 10;
// Floating-point slack when comparing tokens with a packet's size.
constexpr double kEpsilon = 1e-6;

}  // namespace

Pacer::Pacer(std::size_t maxDatagramSize, std::uint64_t window, Microseconds rtt) noexcept
    : m_maxDatagramSize(maxDatagramSize) {
  m_tokens = Capacity(window, rtt);
}

double Pacer::Capacity(std::uint64_t window, Microseconds rtt) const noexcept {
  const double burst =
      kPacingGain * static_cast<double>(window) * kBurstMicroseconds / static_cast<double>(rtt);
  return std::max(static_cast<double>(kBurstPackets * m_maxDatagramSize), burst);
}

double Pacer::TokensAt(Microseconds now, std::uint64_t window, Microseconds rtt) const noexcept {
  const double capacity = Capacity(window, rtt);
  if (now <= m_updated) return std::min(m_tokens, capacity);
  // Multiply before dividing so that whole-byte results come out exact.
  const double earned = kPacingGain * static_cast<double>(window) *
                        static_cast<double>(now - m_updated) / static_cast<double>(rtt);
  return std::min(m_tokens + earned, capacity);
}

void Pacer::Refill(Microseconds now, std::uint64_t window, Microseconds rtt) noexcept {
  m_tokens = TokensAt(now, window, rtt);
  m_updated = std::max(m_updated, now);
}

void Pacer::OnPacketSent(std::uint32_t bytes) noexcept { m_tokens -= static_cast<double>(bytes); }

Microseconds Pacer::NextSendTime(Microseconds now, std::uint64_t window,
                                 Microseconds rtt) const noexcept {
  const double tokens = TokensAt(now, window, rtt);
  const double needed = static_cast<double>(m_maxDatagramSize);
  if (tokens + kEpsilon >= needed) return now;
  const double wait =
      (needed - tokens) * static_cast<double>(rtt) / (kPacingGain * static_cast<double>(window));
  return now + std::max<Microseconds>(1, static_cast<Microseconds>(std::ceil(wait - kEpsilon)));
}

}  // namespace timerwheel::rudp::detail
