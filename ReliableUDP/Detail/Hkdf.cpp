// HKDF-SHA256 on libsodium's HMAC-SHA256 (RFC 5869, section 2).
#include "ReliableUDP/Detail/Hkdf.h"

#include <sodium.h>

#include <algorithm>

namespace timerwheel::rudp::detail {

static_assert(crypto_auth_hmacsha256_BYTES == kHkdfHashSize, "HMAC-SHA256 gives 32 bytes");

HkdfKey HkdfExtract(const std::uint8_t* salt, std::size_t saltSize, const std::uint8_t* ikm,
                    std::size_t ikmSize) noexcept {
  // RFC 5869: no salt means a salt of HashLen zero bytes, which HMAC pads to the same key.
  static const std::uint8_t kNoSalt[kHkdfHashSize] = {};
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, saltSize > 0 ? salt : kNoSalt,
                              saltSize > 0 ? saltSize : sizeof kNoSalt);
  crypto_auth_hmacsha256_update(&state, ikm, ikmSize);
  HkdfKey prk;
  crypto_auth_hmacsha256_final(&state, prk.data());
  sodium_memzero(&state, sizeof state);
  return prk;
}

void HkdfExpand(const HkdfKey& prk, const std::uint8_t* info, std::size_t infoSize,
                std::uint8_t* out, std::size_t size) noexcept {
  if (size > 255 * kHkdfHashSize) return;
  std::uint8_t block[kHkdfHashSize];
  std::size_t done = 0;
  for (std::uint8_t counter = 1; done < size; ++counter) {
    crypto_auth_hmacsha256_state state;
    crypto_auth_hmacsha256_init(&state, prk.data(), prk.size());
    if (counter > 1) crypto_auth_hmacsha256_update(&state, block, sizeof block);
    crypto_auth_hmacsha256_update(&state, info, infoSize);
    crypto_auth_hmacsha256_update(&state, &counter, 1);
    crypto_auth_hmacsha256_final(&state, block);
    sodium_memzero(&state, sizeof state);
    const std::size_t take = std::min(sizeof block, size - done);
    std::copy(block, block + take, out + done);
    done += take;
  }
  sodium_memzero(block, sizeof block);
}

}  // namespace timerwheel::rudp::detail
