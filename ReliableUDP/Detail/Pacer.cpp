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
// A rate of 0 (no estimate yet) would never earn a token: pace at no less than 1 byte per second.
constexpr double kMinBytesPerSecond = 1.0;

}  // namespace

Pacer::Pacer(std::size_t maxDatagramSize, std::uint64_t window, Microseconds rtt) noexcept
    : m_maxDatagramSize(maxDatagramSize) {
  m_tokens = Capacity(FromWindow(window, rtt));
}

Pacer::Rate Pacer::FromWindow(std::uint64_t window, Microseconds rtt) noexcept {
  return Rate{kPacingGain * static_cast<double>(window), static_cast<double>(rtt)};
}

Pacer::Rate Pacer::FromBytesPerSecond(double bytesPerSecond) noexcept {
  return Rate{std::max(bytesPerSecond, kMinBytesPerSecond), 1e6};
}

double Pacer::Capacity(Rate rate) const noexcept {
  const double burst = rate.bytes * kBurstMicroseconds / rate.per;
  return std::max(static_cast<double>(kBurstPackets * m_maxDatagramSize), burst);
}

double Pacer::TokensAt(Microseconds now, Rate rate) const noexcept {
  const double capacity = Capacity(rate);
  if (now <= m_updated) return std::min(m_tokens, capacity);
  const double earned = rate.bytes * static_cast<double>(now - m_updated) / rate.per;
  return std::min(m_tokens + earned, capacity);
}

void Pacer::RefillAt(Microseconds now, Rate rate) noexcept {
  m_tokens = TokensAt(now, rate);
  m_updated = std::max(m_updated, now);
}

void Pacer::Refill(Microseconds now, std::uint64_t window, Microseconds rtt) noexcept {
  RefillAt(now, FromWindow(window, rtt));
}

void Pacer::RefillAtRate(Microseconds now, double bytesPerSecond) noexcept {
  RefillAt(now, FromBytesPerSecond(bytesPerSecond));
}

void Pacer::OnPacketSent(std::uint32_t bytes) noexcept { m_tokens -= static_cast<double>(bytes); }

Microseconds Pacer::NextSendTimeAt(Microseconds now, Rate rate) const noexcept {
  const double tokens = TokensAt(now, rate);
  const double needed = static_cast<double>(m_maxDatagramSize);
  if (tokens + kEpsilon >= needed) return now;
  const double wait = (needed - tokens) * rate.per / rate.bytes;
  return now + std::max<Microseconds>(1, static_cast<Microseconds>(std::ceil(wait - kEpsilon)));
}

Microseconds Pacer::NextSendTime(Microseconds now, std::uint64_t window,
                                 Microseconds rtt) const noexcept {
  return NextSendTimeAt(now, FromWindow(window, rtt));
}

Microseconds Pacer::NextSendTimeAtRate(Microseconds now, double bytesPerSecond) const noexcept {
  return NextSendTimeAt(now, FromBytesPerSecond(bytesPerSecond));
}

}  // namespace timerwheel::rudp::detail
