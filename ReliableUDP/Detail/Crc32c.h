// CRC-32C (Castagnoli), the integrity check on every ReliableUDP datagram.
#pragma once

#include <cstddef>
#include <cstdint>

namespace timerwheel::rudp::detail {

// The UDP checksum is optional over IPv4, weak, and recomputed by any relay that rewrites the
// datagram, so each datagram carries its own CRC-32C. `crc` chains calls over split input:
// Crc32c(b, n2, Crc32c(a, n1)) == Crc32c(a+b, n1+n2). Crc32c("123456789") == 0xE3069283.
std::uint32_t Crc32c(const std::uint8_t* data, std::size_t size, std::uint32_t crc = 0) noexcept;

// Whether Crc32c uses the processor's CRC32 instruction (x86-64 with SSE4.2, asked once at run
// time) rather than the tables; the two give the same result.
bool Crc32cUsesInstruction() noexcept;

// Crc32c always from the tables: what a processor without the instruction computes, for tests.
std::uint32_t Crc32cWithTables(const std::uint8_t* data, std::size_t size,
                               std::uint32_t crc = 0) noexcept;

}  // namespace timerwheel::rudp::detail
