// Key phases and updates (see ConnectionKeys.h).
#include "ReliableUDP/Detail/ConnectionKeys.h"

#include <sodium.h>

namespace timerwheel::rudp::detail {

ConnectionKeys::ConnectionKeys(AeadAlgorithm algorithm, const TrafficSecrets& secrets,
                               bool isClient, std::uint64_t packetsPerKey,
                               std::uint64_t integrityLimit)
    : m_algorithm(algorithm),
      m_packetsPerKey(packetsPerKey > 0 ? packetsPerKey : 1),
      m_integrityLimit(integrityLimit > 0 && integrityLimit < IntegrityLimit(algorithm)
                           ? integrityLimit
                           : IntegrityLimit(algorithm)),
      m_sendSecret(isClient ? secrets.client : secrets.server) {
  const HkdfKey& receiveSecret = isClient ? secrets.server : secrets.client;
  m_nextReceiveSecret = NextTrafficSecret(receiveSecret);
  m_send.emplace(m_algorithm, PacketKeyFromSecret(m_sendSecret));
  ReceiveKey(0).emplace(m_algorithm, PacketKeyFromSecret(receiveSecret));
  ReceiveKey(1).emplace(m_algorithm, PacketKeyFromSecret(m_nextReceiveSecret));
}

ConnectionKeys::~ConnectionKeys() {
  sodium_memzero(m_sendSecret.data(), m_sendSecret.size());
  sodium_memzero(m_nextReceiveSecret.data(), m_nextReceiveSecret.size());
}

bool ConnectionKeys::PrepareSend() {
  // Not again before the peer has been seen in this phase: phases stay at most one apart.
  if (m_sealedInPhase >= m_packetsPerKey && m_peerInPhase) MoveToNextPhase();
  return (m_phase & 1) != 0;
}

std::size_t ConnectionKeys::Seal(PacketNumber packetNumber, std::uint8_t* packet,
                                 std::size_t headerSize, std::size_t payloadSize) noexcept {
  ++m_sealedInPhase;
  return m_send->Seal(packetNumber, packet, headerSize, payloadSize);
}

bool ConnectionKeys::Open(PacketNumber packetNumber, bool phaseBit, std::uint8_t* packet,
                          std::size_t headerSize, std::size_t sealedSize,
                          std::size_t& payloadSize) {
  if (IntegrityLimitReached()) return false;  // RFC 9001 6.6: no more packets are processed
  if (phaseBit == ((m_phase & 1) != 0)) {
    if (!OpenWith(*ReceiveKey(m_phase), packetNumber, packet, headerSize, sealedSize,
                  payloadSize)) {
      return false;
    }
    m_peerInPhase = true;
    if (packetNumber < m_lowestReceivedInPhase) m_lowestReceivedInPhase = packetNumber;
    return true;
  }
  // The other bit: from before the current phase (reordered), or the peer has moved on.
  if (m_hasPrevious && packetNumber < m_lowestReceivedInPhase) {
    return OpenWith(*ReceiveKey(m_phase - 1), packetNumber, packet, headerSize, sealedSize,
                    payloadSize);
  }
  // A peer moves on only after it opened a packet of ours in the current phase, so we have sealed
  // one: else this is a peer forcing updates back to back (each costs us key derivations and two
  // key set-ups), refused before it costs even the AEAD (RFC 9001 6.1's rule, checked on receipt).
  if (m_sealedInPhase == 0) return false;
  if (!OpenWith(*ReceiveKey(m_phase + 1), packetNumber, packet, headerSize, sealedSize,
                payloadSize)) {
    return false;
  }
  MoveToNextPhase();  // the peer updated: follow it
  m_peerInPhase = true;
  m_lowestReceivedInPhase = packetNumber;
  return true;
}

bool ConnectionKeys::OpenWith(const PacketProtection& key, PacketNumber packetNumber,
                              std::uint8_t* packet, std::size_t headerSize, std::size_t sealedSize,
                              std::size_t& payloadSize) noexcept {
  if (key.Open(packetNumber, packet, headerSize, sealedSize, payloadSize)) return true;
  ++m_failedOpens;  // a forgery attempt, whoever sent it (RFC 9001 6.6 counts every key's)
  return false;
}

void ConnectionKeys::DiscardPreviousKey() noexcept {
  if (!m_hasPrevious) return;
  m_hasPrevious = false;
  ReceiveKey(m_phase - 1).reset();  // wipes it; the slot is the next phase change's
}

void ConnectionKeys::MoveToNextPhase() {
  ++m_phase;
  m_sendSecret = NextTrafficSecret(m_sendSecret);
  m_send.emplace(m_algorithm, PacketKeyFromSecret(m_sendSecret));
  // The previous phase's key slot now holds the key after next.
  m_nextReceiveSecret = NextTrafficSecret(m_nextReceiveSecret);
  ReceiveKey(m_phase + 1).emplace(m_algorithm, PacketKeyFromSecret(m_nextReceiveSecret));
  m_hasPrevious = true;
  m_phaseChanged = true;
  m_sealedInPhase = 0;
  m_peerInPhase = false;
  m_lowestReceivedInPhase = std::numeric_limits<PacketNumber>::max();
}

}  // namespace timerwheel::rudp::detail
