// Types and constants shared by every part of the ReliableUDP protocol engine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace timerwheel::rudp::detail {

// Transport time: a monotonic count of microseconds (RTT on loopback is tens of microseconds, so
// milliseconds are too coarse for RTT and pacing; timers still run at the queue's granularity).
using Microseconds = std::uint64_t;

using ConnectionId = std::uint64_t;  // random, never 0 on an established connection
using PacketNumber = std::uint64_t;  // per direction, starts at 0, never reused

inline constexpr std::uint8_t kProtocolVersion = 1;

// A Hello is padded to this size so a server that answers with less never amplifies.
inline constexpr std::size_t kHelloSize = 1200;
inline constexpr std::size_t kCookieSize = 24;          // 8 bytes time window + 16 bytes MAC
inline constexpr std::size_t kChecksumSize = 4;         // CRC-32C trailer on every datagram
inline constexpr std::size_t kMaxDatagramSize = 65507;  // largest UDP payload over IPv4

// Stateless reset (RFC 9000 10.3): a token per connection ID, sent in the handshake; a Reset
// packet that carries it ends the connection. All zero: no token (the peer cannot be reset).
inline constexpr std::size_t kResetTokenSize = 16;
// The largest client token a keyed handshake carries (EndpointOptions::clientToken): it must fit,
// sealed, in the kHelloSize SecureHelloWithCookie with room to spare.
inline constexpr std::size_t kMaxClientTokenSize = 512;
using ResetToken = std::array<std::uint8_t, kResetTokenSize>;
// A Reset packet: type, the connection ID it answers, the token, checksum. Data packets are
// padded to at least kMinDataPacketSize, so that every one of them can be answered by a smaller
// Reset (a reset never amplifies).
inline constexpr std::size_t kResetPacketSize = 1 + 8 + kResetTokenSize + kChecksumSize;
inline constexpr std::size_t kMinDataPacketSize = kResetPacketSize + 1;
// A Refusal packet: type, the client's connection ID, checksum.
inline constexpr std::size_t kRefusalPacketSize = 1 + 8 + kChecksumSize;

// RFC 9002 constants.
inline constexpr std::uint64_t kPacketThreshold = 3;
inline constexpr Microseconds kTimerGranularity = 1000;  // 1 ms
inline constexpr Microseconds kInitialRtt = 333000;      // RFC 9002 6.2.2 (pacing before a sample)
inline constexpr Microseconds kInitialPto = 1000000;     // RFC 6298: 1 s before the first sample
inline constexpr unsigned kMaxPtoBackoff = 6;            // PTO doubles at most 2^6 = 64 times

}  // namespace timerwheel::rudp::detail
