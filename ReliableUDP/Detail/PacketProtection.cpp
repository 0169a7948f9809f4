// AEAD in place with libsodium (see PacketProtection.h).
#include "ReliableUDP/Detail/PacketProtection.h"

#include <sodium.h>

#include <stdexcept>

namespace timerwheel::rudp::detail {
namespace {

static_assert(crypto_aead_chacha20poly1305_ietf_KEYBYTES == kAeadKeySize &&
                  crypto_aead_aes256gcm_KEYBYTES == kAeadKeySize,
              "both AEADs take 256-bit keys");
static_assert(crypto_aead_chacha20poly1305_ietf_NPUBBYTES == kAeadIvSize &&
                  crypto_aead_aes256gcm_NPUBBYTES == kAeadIvSize,
              "both AEADs take 96-bit nonces");
static_assert(crypto_aead_chacha20poly1305_ietf_ABYTES == kAeadTagSize &&
                  crypto_aead_aes256gcm_ABYTES == kAeadTagSize,
              "both AEADs give 128-bit tags");

crypto_aead_aes256gcm_state* AesState(unsigned char* storage) noexcept {
  return reinterpret_cast<crypto_aead_aes256gcm_state*>(storage);
}
const crypto_aead_aes256gcm_state* AesState(const unsigned char* storage) noexcept {
  return reinterpret_cast<const crypto_aead_aes256gcm_state*>(storage);
}

}  // namespace

bool Aes256GcmAvailable() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised");
  return crypto_aead_aes256gcm_is_available() == 1;
}

PacketProtection::PacketProtection(AeadAlgorithm algorithm, const PacketKey& key) noexcept
    : m_algorithm(algorithm), m_key(key) {
  static_assert(sizeof(crypto_aead_aes256gcm_state) <= sizeof m_aesState &&
                    alignof(crypto_aead_aes256gcm_state) <= 16,
                "room for libsodium's AES-GCM state");
  if (m_algorithm == AeadAlgorithm::Aes256Gcm) {
    crypto_aead_aes256gcm_beforenm(AesState(m_aesState), m_key.key.data());
  }
}

PacketProtection::~PacketProtection() {
  sodium_memzero(&m_key, sizeof m_key);
  sodium_memzero(m_aesState, sizeof m_aesState);
}

std::array<std::uint8_t, kAeadIvSize> PacketProtection::Nonce(
    std::uint64_t packetNumber) const noexcept {
  std::array<std::uint8_t, kAeadIvSize> nonce = m_key.iv;
  for (std::size_t i = 0; i < 8; ++i) {
    nonce[kAeadIvSize - 1 - i] ^= static_cast<std::uint8_t>(packetNumber >> (8 * i));
  }
  return nonce;
}

std::size_t PacketProtection::Seal(std::uint64_t packetNumber, std::uint8_t* packet,
                                   std::size_t headerSize, std::size_t payloadSize) const noexcept {
  const auto nonce = Nonce(packetNumber);
  std::uint8_t* payload = packet + headerSize;
  std::uint8_t* tag = payload + payloadSize;
  // In place (ciphertext over plaintext) is allowed by both of libsodium's detached AEADs.
  if (m_algorithm == AeadAlgorithm::Aes256Gcm) {
    crypto_aead_aes256gcm_encrypt_detached_afternm(payload, tag, nullptr, payload, payloadSize,
                                                   packet, headerSize, nullptr, nonce.data(),
                                                   AesState(m_aesState));
  } else {
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(payload, tag, nullptr, payload, payloadSize,
                                                       packet, headerSize, nullptr, nonce.data(),
                                                       m_key.key.data());
  }
  return headerSize + payloadSize + kAeadTagSize;
}

bool PacketProtection::Open(std::uint64_t packetNumber, std::uint8_t* packet,
                            std::size_t headerSize, std::size_t sealedSize,
                            std::size_t& payloadSize) const noexcept {
  if (sealedSize < headerSize + kAeadTagSize) return false;
  const std::size_t size = sealedSize - headerSize - kAeadTagSize;
  const auto nonce = Nonce(packetNumber);
  std::uint8_t* payload = packet + headerSize;
  const std::uint8_t* tag = payload + size;
  // Neither hands out plaintext whose tag did not verify.
  const int result = m_algorithm == AeadAlgorithm::Aes256Gcm
                         ? crypto_aead_aes256gcm_decrypt_detached_afternm(
                               payload, nullptr, payload, size, tag, packet, headerSize,
                               nonce.data(), AesState(m_aesState))
                         : crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                               payload, nullptr, payload, size, tag, packet, headerSize,
                               nonce.data(), m_key.key.data());
  if (result != 0) return false;
  payloadSize = size;
  return true;
}

}  // namespace timerwheel::rudp::detail
