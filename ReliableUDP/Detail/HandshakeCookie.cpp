// Minting and checking stateless handshake cookies (layout in docs/reliable-udp-wire-format.md).
#include "ReliableUDP/Detail/HandshakeCookie.h"

namespace timerwheel::rudp::detail {
namespace {

// An IPv6 address is the longest this is meant for; the MAC input lives on the stack.
constexpr std::size_t kMaxAddressSize = 16;
constexpr std::size_t kMacInputCapacity = 8 + kMaxAddressSize + 2 + 8;

void StoreBig64(std::uint8_t* p, std::uint64_t value) noexcept {
  for (int i = 7; i >= 0; --i) {
    p[i] = static_cast<std::uint8_t>(value);
    value >>= 8;
  }
}

std::uint64_t LoadBig64(const std::uint8_t* p) noexcept {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | p[i];
  return value;
}

// Writes the 16-byte MAC for `window` into mac[0..15].
void ComputeMac(const SipHashKey& first, const SipHashKey& second, std::uint64_t window,
                const std::uint8_t* address, std::size_t addressSize, std::uint16_t port,
                ConnectionId clientId, std::uint8_t* mac) noexcept {
  std::uint8_t input[kMacInputCapacity];
  std::size_t size = 0;
  StoreBig64(input, window);
  size += 8;
  for (std::size_t i = 0; i < addressSize; ++i) input[size++] = address[i];
  input[size++] = static_cast<std::uint8_t>(port >> 8);
  input[size++] = static_cast<std::uint8_t>(port);
  StoreBig64(input + size, clientId);
  size += 8;
  StoreBig64(mac, SipHash24(first, input, size));
  StoreBig64(mac + 8, SipHash24(second, input, size));
}

}  // namespace

HandshakeCookie::HandshakeCookie(SipHashKey first, SipHashKey second,
                                 Microseconds windowLength) noexcept
    : m_first(first), m_second(second), m_windowLength(windowLength > 0 ? windowLength : 1) {}

HandshakeCookie::Value HandshakeCookie::Mint(const std::uint8_t* address, std::size_t addressSize,
                                             std::uint16_t port, ConnectionId clientId,
                                             Microseconds now) const noexcept {
  Value cookie{};
  // Longer addresses are outside the contract; an all-zero cookie never verifies for them.
  if (addressSize > kMaxAddressSize) return cookie;
  const std::uint64_t window = now / m_windowLength;
  StoreBig64(cookie.data(), window);
  ComputeMac(m_first, m_second, window, address, addressSize, port, clientId, cookie.data() + 8);
  return cookie;
}

bool HandshakeCookie::Verify(const Value& cookie, const std::uint8_t* address,
                             std::size_t addressSize, std::uint16_t port, ConnectionId clientId,
                             Microseconds now) const noexcept {
  if (addressSize > kMaxAddressSize) return false;
  const std::uint64_t current = now / m_windowLength;
  const std::uint64_t window = LoadBig64(cookie.data());
  if (window != current && (current == 0 || window != current - 1)) return false;

  std::uint8_t expected[16];
  ComputeMac(m_first, m_second, window, address, addressSize, port, clientId, expected);
  // Accumulate every difference so the time taken does not reveal how many leading bytes matched.
  std::uint8_t difference = 0;
  for (std::size_t i = 0; i < sizeof(expected); ++i) difference |= expected[i] ^ cookie[8 + i];
  return difference == 0;
}

}  // namespace timerwheel::rudp::detail
