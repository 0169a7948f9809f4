// The packet keys of one connection, both directions, and their updates (issue 20).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "ReliableUDP/Detail/KeySchedule.h"
#include "ReliableUDP/Detail/PacketProtection.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// Key phases, as QUIC's (RFC 9001, section 6): the handshake's traffic secrets are phase 0, and
// phase p + 1's secrets are NextTrafficSecret of phase p's, for both directions together. Every
// protected packet carries the low bit of the phase that sealed it.
//
// An endpoint moves to the next phase after sealing `packetsPerKey` packets in the current one
// (far below either AEAD's limits: AES-256-GCM's confidentiality limit is 2^23 full-size packets,
// RFC 9001 6.6), but only once the peer has shown that it is in the current phase too (a packet
// of it opened under the current key), so the phases never get more than one apart. A peer's
// update is noticed when a packet with the other phase bit opens under the next key; only then
// does anything change, so a forged packet cannot move the keys. The same rule is enforced on the
// peer: its update is refused until we have sealed a packet in the current phase, so a rogue peer
// forces at most one update per packet we send. Packets reordered across an
// update still open under the previous key, kept until DiscardPreviousKey (the connection calls
// it some PTOs after the update): a packet with the other bit is from the previous phase if its
// number is below every number received in the current phase, else from the next.
// TakePhaseChange tells the owner that a phase change happened, so it can time the discard.
//
// Integrity limit (RFC 9001 6.6): every packet that fails to open is an attempt at a forgery,
// and past the AEAD's limit of such attempts, across all keys of the connection, a forgery can no
// longer be ruled out: 2^36 for ChaCha20-Poly1305, 2^52 for AES-256-GCM. The count lives here,
// with the keys, so that only encrypted connections pay for it; once it reaches the limit
// nothing opens any more and IntegrityLimitReached tells the connection to end.
//
// No allocation after construction. Not thread-safe (the connection's caller serialises).
class ConnectionKeys {
 public:
  static constexpr std::uint64_t kDefaultPacketsPerKey = std::uint64_t{1} << 22;
  static constexpr std::uint64_t kChaCha20Poly1305IntegrityLimit = std::uint64_t{1} << 36;
  static constexpr std::uint64_t kAes256GcmIntegrityLimit = std::uint64_t{1} << 52;
  static constexpr std::uint64_t IntegrityLimit(AeadAlgorithm algorithm) noexcept {
    return algorithm == AeadAlgorithm::Aes256Gcm ? kAes256GcmIntegrityLimit
                                                 : kChaCha20Poly1305IntegrityLimit;
  }

  // integrityLimit: failed opens that end the connection; 0 (or more than the AEAD's): the
  // AEAD's. Lower only in tests, which cannot send 2^36 packets.
  ConnectionKeys(AeadAlgorithm algorithm, const TrafficSecrets& secrets, bool isClient,
                 std::uint64_t packetsPerKey = kDefaultPacketsPerKey,
                 std::uint64_t integrityLimit = 0);
  ~ConnectionKeys();  // wipes the secrets
  ConnectionKeys(const ConnectionKeys&) = delete;
  ConnectionKeys& operator=(const ConnectionKeys&) = delete;

  // Before each packet is written: moves to the next phase if it is time, and returns the phase
  // bit to put in the packet's header; Seal then seals with that phase's key.
  bool PrepareSend();
  // Seals with the current send key (the phase PrepareSend returned).
  std::size_t Seal(PacketNumber packetNumber, std::uint8_t* packet, std::size_t headerSize,
                   std::size_t payloadSize) noexcept;

  // Opens a packet whose header carried `phaseBit`. False (and no change of phase) if it does
  // not authenticate under the key its bit and number select (counted against the integrity
  // limit), and for every packet once the limit is reached.
  bool Open(PacketNumber packetNumber, bool phaseBit, std::uint8_t* packet, std::size_t headerSize,
            std::size_t sealedSize, std::size_t& payloadSize);

  void DiscardPreviousKey() noexcept;
  // True once after each phase change (ours or the peer's), false otherwise.
  bool TakePhaseChange() noexcept {
    const bool changed = m_phaseChanged;
    m_phaseChanged = false;
    return changed;
  }
  bool HasPreviousKey() const noexcept { return m_hasPrevious; }
  std::uint64_t Phase() const noexcept { return m_phase; }
  AeadAlgorithm Algorithm() const noexcept { return m_algorithm; }
  // Packets that failed to open under these keys (any phase), and whether that reached the
  // integrity limit: then the connection must end (nothing opens any more).
  std::uint64_t FailedOpens() const noexcept { return m_failedOpens; }
  bool IntegrityLimitReached() const noexcept { return m_failedOpens >= m_integrityLimit; }

 private:
  // Opens with `key`, counting a failure.
  bool OpenWith(const PacketProtection& key, PacketNumber packetNumber, std::uint8_t* packet,
                std::size_t headerSize, std::size_t sealedSize, std::size_t& payloadSize) noexcept;
  void MoveToNextPhase();
  std::optional<PacketProtection>& ReceiveKey(std::uint64_t phase) noexcept {
    return m_receiveKeys[phase % 3];
  }

  AeadAlgorithm m_algorithm;
  std::uint64_t m_packetsPerKey;
  std::uint64_t m_integrityLimit;
  std::uint64_t m_failedOpens = 0;
  std::uint64_t m_phase = 0;
  HkdfKey m_sendSecret{};         // the current phase's
  HkdfKey m_nextReceiveSecret{};  // the next phase's (the current one's is needed no more)
  std::optional<PacketProtection> m_send;
  // The receive keys of phases P - 1 (while m_hasPrevious), P and P + 1, at index phase % 3:
  // a phase change replaces the previous phase's key by the one after next, in place.
  std::optional<PacketProtection> m_receiveKeys[3];
  bool m_hasPrevious = false;
  bool m_phaseChanged = false;  // since the last TakePhaseChange
  std::uint64_t m_sealedInPhase = 0;
  bool m_peerInPhase = false;  // a packet of the current phase arrived from the peer
  PacketNumber m_lowestReceivedInPhase = (std::numeric_limits<PacketNumber>::max)();
};

}  // namespace timerwheel::rudp::detail
