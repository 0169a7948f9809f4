// The keyed handshake's key schedule (issue 20): X25519, HKDF-SHA256 and a transcript hash, in
// the shape of the Noise NK pattern (the client knows the server's static key beforehand):
//
//   <- s                 the client pins the server's static public key S
//   -> e, es             HelloWithCookie: the client's ephemeral E, then DH(e, S)
//   <- e, ee             Welcome: the server's ephemeral, then DH(e, e')
//
// State: a chaining key ck and a transcript hash th.
//   ck = SHA-256("TimerWheel ReliableUDP NK 1"),  th = SHA-256(ck || S)
//   MixHash(x):  th = SHA-256(th || x)
//   MixKey(dh):  ck = HKDF-Extract(salt = ck, ikm = dh)
//   MessageKey(label): key = HKDF-Expand(ck, label || " key" || th, 32),
//                      iv  = HKDF-Expand(ck, label || " iv" || th, 12)
//   Split():     client = HKDF-Expand(ck, "client traffic" || th, 32),
//                server = HKDF-Expand(ck, "server traffic" || th, 32)
// A traffic secret gives a packet key as MessageKey does (with th empty), and the next secret of a
// key update as HKDF-Expand(secret, "key update", 32).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/Hkdf.h"
#include "ReliableUDP/Detail/PacketProtection.h"
#include "ReliableUDP/Detail/Wipe.h"

namespace timerwheel::rudp::detail {

inline constexpr std::size_t kX25519KeySize = 32;
using X25519Key = std::array<std::uint8_t, kX25519KeySize>;

// Wipes itself when it goes (an ephemeral pair, the server's static pair at the endpoint's end).
struct X25519KeyPair {
  X25519Key secretKey{};
  X25519Key publicKey{};
  ~X25519KeyPair() { Wipe(); }
  void Wipe() noexcept { WipeBytes(this, sizeof *this); }
};

// A fresh key pair from libsodium's random numbers. Throws std::runtime_error if libsodium
// cannot be initialised.
X25519KeyPair GenerateX25519KeyPair();
// The public key of a secret key (X25519(secret, 9), RFC 7748).
X25519Key X25519PublicKey(const X25519Key& secretKey) noexcept;
// X25519(secret, peer). False if `peer` is a point of small order (the result would be all
// zero, a value an attacker could force): such a key is refused.
bool X25519(const X25519Key& secretKey, const X25519Key& peerPublicKey, X25519Key& shared) noexcept;

// The two directions' secrets after the handshake. Wipes itself when it goes (Split()'s
// temporary included).
struct TrafficSecrets {
  HkdfKey client{};  // client -> server
  HkdfKey server{};  // server -> client
  ~TrafficSecrets() { Wipe(); }
  void Wipe() noexcept { WipeBytes(this, sizeof *this); }
};

// The handshake state, the same on both sides as long as both saw the same messages.
class KeySchedule {
 public:
  explicit KeySchedule(const X25519Key& serverStaticPublic) noexcept;
  ~KeySchedule();  // wipes the chaining key
  // Copyable: a client tries the Welcome's half of the exchange on a copy.
  KeySchedule(const KeySchedule&) = default;
  KeySchedule& operator=(const KeySchedule&) = default;

  void MixHash(const std::uint8_t* data, std::size_t size) noexcept;
  void MixKey(const X25519Key& sharedSecret) noexcept;
  // label: a NUL-terminated ASCII string ("hello", "welcome").
  PacketKey MessageKey(const char* label) const noexcept;
  TrafficSecrets Split() const noexcept;

  const HkdfKey& TranscriptHash() const noexcept { return m_transcript; }

 private:
  HkdfKey m_chainingKey{};
  HkdfKey m_transcript{};
};

PacketKey PacketKeyFromSecret(const HkdfKey& trafficSecret) noexcept;
HkdfKey NextTrafficSecret(const HkdfKey& trafficSecret) noexcept;

}  // namespace timerwheel::rudp::detail
