// Stateless reset tokens: two SipHash-2-4 values of the connection ID under the endpoint secret.
#include "ReliableUDP/Detail/StatelessReset.h"

#include <cstddef>

namespace timerwheel::rudp::detail {
namespace {

std::uint64_t LoadLittle(const std::uint8_t* p) noexcept {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

void StoreLittle(std::uint8_t* p, std::uint64_t value) noexcept {
  for (int i = 0; i < 8; ++i) {
    p[i] = static_cast<std::uint8_t>(value);
    value >>= 8;
  }
}

}  // namespace

StatelessResetTokens::StatelessResetTokens(const ResetToken& secret) {
  if (IsNullResetToken(secret)) {
    m_key = RandomSipHashKey();
  } else {
    m_key = SipHashKey{LoadLittle(secret.data()), LoadLittle(secret.data() + 8)};
  }
}

ResetToken StatelessResetTokens::For(ConnectionId id) const noexcept {
  // Message: the ID and a half index; the two halves are independent 64-bit MACs.
  std::uint8_t message[9];
  StoreLittle(message, id);
  ResetToken token{};
  for (std::uint8_t half = 0; half < 2; ++half) {
    message[8] = half;
    StoreLittle(token.data() + std::size_t{8} * half, SipHash24(m_key, message, sizeof message));
  }
  return token;
}

std::uint64_t ResetTokenPrefix(const ResetToken& token) noexcept {
  return LoadLittle(token.data());
}

bool IsNullResetToken(const ResetToken& token) noexcept {
  for (const std::uint8_t byte : token) {
    if (byte != 0) return false;
  }
  return true;
}

}  // namespace timerwheel::rudp::detail
