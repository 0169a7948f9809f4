// A token bucket: at most `perSecond` events per second on average, bursts of up to one second's.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// Integer arithmetic in millionths of a token (one token per second is one millionth per
// microsecond), so nothing drifts. Not thread-safe (the endpoint's lock guards it).
class TokenBucket {
 public:
  // perSecond == 0: unlimited. Rates above 10^12 per second are that (no overflow in millionths).
  explicit TokenBucket(std::uint64_t perSecond) noexcept
      : m_perSecond((std::min)(perSecond, kMaxPerSecond)),
        m_capacity(m_perSecond * kScale),
        m_level(m_capacity) {}

  // Whether a token is available now, without taking it.
  bool Available(Microseconds now) noexcept {
    Refill(now);
    return m_perSecond == 0 || m_level >= kScale;
  }
  // Whether the bucket is full now: it then decides exactly as a new one would (a bucket is full
  // again at most one second after its last take).
  bool Full(Microseconds now) noexcept {
    Refill(now);
    return m_level >= m_capacity;
  }
  // Takes a token if one is available.
  bool TryTake(Microseconds now) noexcept {
    if (!Available(now)) return false;
    if (m_perSecond != 0) m_level -= kScale;
    return true;
  }

 private:
  static constexpr std::uint64_t kScale = 1'000'000;
  static constexpr std::uint64_t kMaxPerSecond = 1'000'000'000'000;

  void Refill(Microseconds now) noexcept {
    if (now <= m_last) return;
    // At most one second counts: the bucket is full by then (and the product cannot overflow).
    const std::uint64_t elapsed = (std::min)(now - m_last, kScale);
    m_last = now;
    m_level = (std::min)(m_capacity, m_level + elapsed * m_perSecond);
  }

  std::uint64_t m_perSecond;
  std::uint64_t m_capacity;
  std::uint64_t m_level;
  Microseconds m_last = 0;
};

}  // namespace timerwheel::rudp::detail
