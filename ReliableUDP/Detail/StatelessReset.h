// Stateless reset tokens (RFC 9000 10.3): derived from an endpoint secret and a connection ID.
#pragma once

#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SipHash.h"

namespace timerwheel::rudp::detail {

// The token of a connection ID is a keyed hash of it, so the endpoint keeps no state per token:
// after losing a connection (abort, restart with the same secret) it can still compute the
// token of any ID a peer sends to, and a peer that learnt the token in the handshake recognises
// the Reset. An off-path attacker never sees the token and cannot compute it without the secret.
// Thread-safe (const).
class StatelessResetTokens {
 public:
  // secret all zero: a random one (libsodium's randombytes).
  explicit StatelessResetTokens(const ResetToken& secret);
  ResetToken For(ConnectionId id) const noexcept;

 private:
  SipHashKey m_key;
};

// The first 8 bytes of a token, as the key of a hash map of tokens.
std::uint64_t ResetTokenPrefix(const ResetToken& token) noexcept;
bool IsNullResetToken(const ResetToken& token) noexcept;

}  // namespace timerwheel::rudp::detail
