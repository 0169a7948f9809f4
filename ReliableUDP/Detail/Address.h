// A peer's UDP address as the engine sees it: IP bytes and a port, with no socket library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>

namespace timerwheel::rudp::detail {

// What an IPv4 or IPv6 UDP endpoint is to the protocol: something to compare, hash, send to and
// bind a handshake cookie to. The I/O layer converts its own endpoint type (Asio's, or a
// simulated network's) to and from this one; the engine never needs more.
//
// Invariant: for V4 only the first 4 bytes are used and the rest are zero, and scopeId is 0, so
// member-wise comparison is address comparison.
struct Address {
  enum class Family : std::uint8_t { V4, V6 };

  Family family = Family::V4;
  std::uint16_t port = 0;
  std::uint32_t scopeId = 0;  // IPv6 link-local scope (interface); 0 otherwise
  std::array<std::uint8_t, 16> bytes{};

  // The address bytes that matter: 4 for IPv4, 16 for IPv6 (what a handshake cookie binds).
  std::size_t ByteCount() const noexcept { return family == Family::V4 ? 4 : 16; }
  // The leading bytes that name the network the address is in, as one customer typically gets
  // it: /24 for IPv4, /56 for IPv6. The admission limits and the key-exchange shares count a
  // prefix's addresses together.
  std::size_t PrefixByteCount() const noexcept { return family == Family::V4 ? 3 : 7; }

  friend bool operator==(const Address& a, const Address& b) noexcept {
    return a.family == b.family && a.port == b.port && a.scopeId == b.scopeId && a.bytes == b.bytes;
  }
  friend bool operator!=(const Address& a, const Address& b) noexcept { return !(a == b); }
  friend bool operator<(const Address& a, const Address& b) noexcept {
    return std::tie(a.family, a.bytes, a.port, a.scopeId) <
           std::tie(b.family, b.bytes, b.port, b.scopeId);
  }
};

}  // namespace timerwheel::rudp::detail
