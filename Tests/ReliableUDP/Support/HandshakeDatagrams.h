// The client's handshake datagrams as a script speaking the wire format sends them: for tests
// that play a client (or an attacker) by hand, on the simulated network or on real sockets.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/WireFormat.h"

namespace timerwheel::test {

// What a client with the default options announces, near enough for any server test.
inline rudp::detail::TransportParameters TypicalParameters() {
  rudp::detail::TransportParameters parameters;
  parameters.maxAckDelayMs = 25;
  parameters.initialMaxData = 1 << 20;
  parameters.maxDatagramSize = 1200;
  parameters.idleTimeoutMs = 30'000;
  parameters.maxMessageSize = 1 << 16;
  return parameters;
}

// A Hello from client ID `clientId` (padded to kHelloSize, as the wire format requires).
inline std::vector<std::uint8_t> HelloDatagram(rudp::detail::ConnectionId clientId) {
  std::vector<std::uint8_t> datagram(rudp::detail::kHelloSize);
  rudp::detail::PacketWriter writer(datagram.data(), datagram.size());
  writer.BeginHello(clientId);
  datagram.resize(writer.Finish());
  return datagram;
}

// A server's Cookie for client ID `clientId` (or anyone's who sends it from the server's address).
inline std::vector<std::uint8_t> CookieDatagram(
    rudp::detail::ConnectionId clientId,
    const std::array<std::uint8_t, rudp::detail::kCookieSize>& cookie) {
  std::vector<std::uint8_t> datagram(rudp::detail::kHelloSize);
  rudp::detail::PacketWriter writer(datagram.data(), datagram.size());
  writer.BeginCookie(clientId, cookie);
  datagram.resize(writer.Finish());
  return datagram;
}

// The plaintext HelloWithCookie answering `cookie` for client ID `clientId`.
inline std::vector<std::uint8_t> HelloWithCookieDatagram(
    rudp::detail::ConnectionId clientId,
    const std::array<std::uint8_t, rudp::detail::kCookieSize>& cookie,
    const rudp::detail::TransportParameters& parameters = TypicalParameters()) {
  std::vector<std::uint8_t> datagram(rudp::detail::kHelloSize);
  rudp::detail::PacketWriter writer(datagram.data(), datagram.size());
  writer.BeginHelloWithCookie(clientId, cookie, parameters);
  datagram.resize(writer.Finish());
  return datagram;
}

}  // namespace timerwheel::test
