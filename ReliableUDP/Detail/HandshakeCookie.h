// Stateless handshake cookies: a server proves a client owns its address without keeping state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SipHash.h"

namespace timerwheel::rudp::detail {

// A cookie is 8 bytes of time-window index (big-endian) followed by a 16-byte MAC (two SipHash-2-4
// values under independent keys, each big-endian) over: window index (8 bytes BE), client address
// bytes, client port (2 bytes BE), client connection ID (8 bytes BE). Verify accepts the current
// and the previous window, so a cookie is valid for between one and two window lengths. Thread
// safety: const methods only; safe from any thread.
class HandshakeCookie {
 public:
  using Value = std::array<std::uint8_t, kCookieSize>;

  // windowLength: > 0 (0 is treated as 1 microsecond rather than dividing by zero).
  HandshakeCookie(SipHashKey first, SipHashKey second, Microseconds windowLength) noexcept;

  // address: the raw address bytes (4 for IPv4, 16 for IPv6). More than 16 bytes is outside the
  // contract: Mint returns an all-zero cookie and Verify returns false.
  Value Mint(const std::uint8_t* address, std::size_t addressSize, std::uint16_t port,
             ConnectionId clientId, Microseconds now) const noexcept;

  // False for a forged, altered, stale (older than the previous window), future-dated cookie, or
  // one minted for another address, port or connection ID.
  bool Verify(const Value& cookie, const std::uint8_t* address, std::size_t addressSize,
              std::uint16_t port, ConnectionId clientId, Microseconds now) const noexcept;

 private:
  SipHashKey m_first;
  SipHashKey m_second;
  Microseconds m_windowLength;
};

}  // namespace timerwheel::rudp::detail
