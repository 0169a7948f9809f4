// The keyed handshake's key schedule (see KeySchedule.h for the derivations).
#include "ReliableUDP/Detail/KeySchedule.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace timerwheel::rudp::detail {
namespace {

static_assert(crypto_scalarmult_BYTES == kX25519KeySize &&
                  crypto_scalarmult_SCALARBYTES == kX25519KeySize,
              "X25519 keys are 32 bytes");
static_assert(crypto_hash_sha256_BYTES == kHkdfHashSize, "SHA-256 gives 32 bytes");

constexpr char kProtocolName[] = "TimerWheel ReliableUDP NK 1";
// The longest label || suffix || transcript hash that Expand gets.
constexpr std::size_t kMaxInfoSize = 32 + kHkdfHashSize;

// HKDF-Expand(key, label || suffix || context) into out[0, size).
void ExpandLabel(const HkdfKey& key, const char* label, const char* suffix,
                 const std::uint8_t* context, std::size_t contextSize, std::uint8_t* out,
                 std::size_t size) noexcept {
  std::uint8_t info[kMaxInfoSize];
  const std::size_t labelSize = std::strlen(label);
  const std::size_t suffixSize = std::strlen(suffix);
  if (labelSize + suffixSize + contextSize > sizeof info) return;  // a caller bug: labels are ours
  // The labels are ASCII text without their terminating NUL: info is bytes, not a string.
  std::copy(label, label + labelSize, info);
  std::copy(suffix, suffix + suffixSize, info + labelSize);
  if (contextSize > 0) std::copy(context, context + contextSize, info + labelSize + suffixSize);
  HkdfExpand(key, info, labelSize + suffixSize + contextSize, out, size);
}

PacketKey DerivePacketKey(const HkdfKey& key, const char* label, const std::uint8_t* context,
                          std::size_t contextSize) noexcept {
  PacketKey packetKey;
  ExpandLabel(key, label, " key", context, contextSize, packetKey.key.data(), packetKey.key.size());
  ExpandLabel(key, label, " iv", context, contextSize, packetKey.iv.data(), packetKey.iv.size());
  return packetKey;
}

}  // namespace

X25519KeyPair GenerateX25519KeyPair() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium could not be initialised");
  X25519KeyPair pair;
  randombytes_buf(pair.secretKey.data(), pair.secretKey.size());
  pair.publicKey = X25519PublicKey(pair.secretKey);
  return pair;
}

X25519Key X25519PublicKey(const X25519Key& secretKey) noexcept {
  X25519Key publicKey;
  crypto_scalarmult_base(publicKey.data(), secretKey.data());
  return publicKey;
}

bool X25519(const X25519Key& secretKey, const X25519Key& peerPublicKey,
            X25519Key& shared) noexcept {
  // libsodium returns -1 when the result is all zero (a small-order peer key).
  return crypto_scalarmult(shared.data(), secretKey.data(), peerPublicKey.data()) == 0;
}

KeySchedule::KeySchedule(const X25519Key& serverStaticPublic) noexcept {
  crypto_hash_sha256(m_chainingKey.data(), reinterpret_cast<const unsigned char*>(kProtocolName),
                     sizeof kProtocolName - 1);
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  crypto_hash_sha256_update(&state, m_chainingKey.data(), m_chainingKey.size());
  crypto_hash_sha256_update(&state, serverStaticPublic.data(), serverStaticPublic.size());
  crypto_hash_sha256_final(&state, m_transcript.data());
}

KeySchedule::~KeySchedule() { sodium_memzero(m_chainingKey.data(), m_chainingKey.size()); }

void KeySchedule::MixHash(const std::uint8_t* data, std::size_t size) noexcept {
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  crypto_hash_sha256_update(&state, m_transcript.data(), m_transcript.size());
  crypto_hash_sha256_update(&state, data, size);
  crypto_hash_sha256_final(&state, m_transcript.data());
}

void KeySchedule::MixKey(const X25519Key& sharedSecret) noexcept {
  m_chainingKey = HkdfExtract(m_chainingKey.data(), m_chainingKey.size(), sharedSecret.data(),
                              sharedSecret.size());
}

PacketKey KeySchedule::MessageKey(const char* label) const noexcept {
  return DerivePacketKey(m_chainingKey, label, m_transcript.data(), m_transcript.size());
}

TrafficSecrets KeySchedule::Split() const noexcept {
  TrafficSecrets secrets;
  ExpandLabel(m_chainingKey, "client traffic", "", m_transcript.data(), m_transcript.size(),
              secrets.client.data(), secrets.client.size());
  ExpandLabel(m_chainingKey, "server traffic", "", m_transcript.data(), m_transcript.size(),
              secrets.server.data(), secrets.server.size());
  return secrets;
}

PacketKey PacketKeyFromSecret(const HkdfKey& trafficSecret) noexcept {
  return DerivePacketKey(trafficSecret, "packet", nullptr, 0);
}

HkdfKey NextTrafficSecret(const HkdfKey& trafficSecret) noexcept {
  HkdfKey next;
  ExpandLabel(trafficSecret, "key update", "", nullptr, 0, next.data(), next.size());
  return next;
}

}  // namespace timerwheel::rudp::detail
