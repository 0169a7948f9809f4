// HKDF with HMAC-SHA256 (RFC 5869): the key derivation of the keyed handshake (issue 20).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace timerwheel::rudp::detail {

inline constexpr std::size_t kHkdfHashSize = 32;
using HkdfKey = std::array<std::uint8_t, kHkdfHashSize>;

// PRK = HMAC-SHA256(salt, ikm). libsodium's crypto_auth_hmacsha256 takes a key of any length, as
// HMAC does (a key longer than the block is hashed first).
HkdfKey HkdfExtract(const std::uint8_t* salt, std::size_t saltSize, const std::uint8_t* ikm,
                    std::size_t ikmSize) noexcept;

// OKM = the first `size` bytes of T(1) || T(2) || ..., T(i) = HMAC-SHA256(PRK, T(i-1) || info ||
// i). size <= 255 * 32 (RFC 5869's limit); more is a caller bug and fills nothing.
void HkdfExpand(const HkdfKey& prk, const std::uint8_t* info, std::size_t infoSize,
                std::uint8_t* out, std::size_t size) noexcept;

}  // namespace timerwheel::rudp::detail
