// Authenticated encryption of packets in place (issue 20): AES-256-GCM or ChaCha20-Poly1305.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/Wipe.h"

namespace timerwheel::rudp::detail {

enum class AeadAlgorithm : std::uint8_t {
  ChaCha20Poly1305 = 0,  // RFC 8439 (libsodium's _ietf variant: 96-bit nonce); runs everywhere
  Aes256Gcm = 1,         // NIST SP 800-38D; libsodium has it only with AES-NI and PCLMUL
};

inline constexpr std::size_t kAeadKeySize = 32;
inline constexpr std::size_t kAeadIvSize = 12;
inline constexpr std::size_t kAeadTagSize = 16;

// One direction's key: the AEAD key, and the IV that each packet number is XORed into. Every
// copy wipes itself when it goes (a derivation's temporary, a handshake's one-use key, the
// Welcome key a server keeps to repeat its Welcome), on every path out of its scope.
struct PacketKey {
  std::array<std::uint8_t, kAeadKeySize> key{};
  std::array<std::uint8_t, kAeadIvSize> iv{};
  ~PacketKey() { Wipe(); }
  void Wipe() noexcept { WipeBytes(this, sizeof *this); }
};

// Whether this machine can use AES-256-GCM (libsodium's implementation needs the CPU's AES and
// carry-less multiplication instructions). Calls sodium_init.
bool Aes256GcmAvailable();

// Seals and opens the packets of one direction under one key. The nonce is the IV XOR the
// packet number (big-endian in the IV's last 8 bytes, as in TLS 1.3 and QUIC), so a key must
// never seal two packets with the same number: the connection's packet numbers only grow.
// The header is authenticated (associated data), not encrypted. No allocation; the AES state
// is expanded once, here. Not copyable (the AES state is large and holds key material, wiped
// on destruction).
class PacketProtection {
 public:
  // algorithm Aes256Gcm needs Aes256GcmAvailable().
  PacketProtection(AeadAlgorithm algorithm, const PacketKey& key) noexcept;
  ~PacketProtection();
  PacketProtection(const PacketProtection&) = delete;
  PacketProtection& operator=(const PacketProtection&) = delete;

  AeadAlgorithm Algorithm() const noexcept { return m_algorithm; }

  // packet[0, headerSize) is the header, packet[headerSize, headerSize + payloadSize) the
  // plaintext: encrypts the plaintext in place and writes the tag after it. Returns the sealed
  // size, headerSize + payloadSize + kAeadTagSize; the buffer must hold that many bytes.
  std::size_t Seal(std::uint64_t packetNumber, std::uint8_t* packet, std::size_t headerSize,
                   std::size_t payloadSize) const noexcept;

  // The reverse, in place: packet[headerSize, sealedSize) is ciphertext and tag. True and the
  // plaintext size in `payloadSize` if the tag verifies; false for a packet altered in any bit,
  // sealed under another key or number, or shorter than a tag. After a false return the payload
  // bytes are unspecified (libsodium's AES-GCM zeroes what it decrypted): drop the datagram.
  bool Open(std::uint64_t packetNumber, std::uint8_t* packet, std::size_t headerSize,
            std::size_t sealedSize, std::size_t& payloadSize) const noexcept;

 private:
  std::array<std::uint8_t, kAeadIvSize> Nonce(std::uint64_t packetNumber) const noexcept;

  AeadAlgorithm m_algorithm;
  PacketKey m_key;
  // libsodium's expanded AES key and GHASH table (crypto_aead_aes256gcm_state: 512 bytes,
  // 16-byte aligned), kept opaque here so that this header does not include <sodium.h>.
  alignas(16) unsigned char m_aesState[512] = {};
};

}  // namespace timerwheel::rudp::detail
