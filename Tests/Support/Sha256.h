// SHA-256 for tests that compare what was sent with what arrived: libsodium's crypto_hash_sha256.
#pragma once

#include <sodium.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace timerwheel::test {

// Incremental: Update with each piece as it is sent or received, then HexDigest once.
class Sha256 {
 public:
  Sha256() { crypto_hash_sha256_init(&m_state); }

  void Update(const std::uint8_t* data, std::size_t size) {
    crypto_hash_sha256_update(&m_state, data, size);
  }

  // The digest as 64 lowercase hex digits. The object must not be used afterwards.
  std::string HexDigest() {
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&m_state, digest);
    std::string hex;
    for (unsigned char byte : digest) {
      char pair[3];
      std::snprintf(pair, sizeof pair, "%02x", static_cast<unsigned>(byte));
      hex += pair;
    }
    return hex;
  }

 private:
  crypto_hash_sha256_state m_state;
};

}  // namespace timerwheel::test
