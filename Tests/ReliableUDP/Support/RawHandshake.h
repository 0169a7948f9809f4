// Handshakes driven by hand from any address on the simulated network: what a script speaking
// the wire format does (the attacks), and how tests see a server's stateless replies.
#pragma once

#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/HandshakeDatagrams.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"

namespace timerwheel::test {

// Watches what `server` sends and plays the client side of handshakes from arbitrary addresses.
// Install before anything else sets the network's tap (it replaces it).
class RawHandshake {
 public:
  RawHandshake(SimulatedNetwork& network, SimulatedHost& server)
      : m_network(network), m_server(server) {
    m_network.tap = [this](const Udp::endpoint& from, const Udp::endpoint& to,
                           const std::vector<std::uint8_t>& datagram) {
      if (from == m_server.Address()) {
        m_lastReply = datagram;
        m_lastReplyTo = to;
      }
    };
  }
  ~RawHandshake() { m_network.tap = nullptr; }
  RawHandshake(const RawHandshake&) = delete;
  RawHandshake& operator=(const RawHandshake&) = delete;

  enum class Outcome { Welcome, Refusal, Cookie, Nothing };

  // Sends a Hello from `from` with client ID `id`; on a Cookie, the HelloWithCookie. Returns what
  // the server answered last (to `from`).
  Outcome Connect(const Udp::endpoint& from, rudp::detail::ConnectionId id) {
    using namespace rudp::detail;
    const Outcome first = Deliver(from, HelloDatagram(id));
    if (first != Outcome::Cookie) return first;
    DecodedPacket cookie;
    DecodePacket(m_lastReply.data(), m_lastReply.size(), cookie);
    return Deliver(from, HelloWithCookieDatagram(id, cookie.header.cookie));
  }

  // Delivers `datagram` from `from` and says what the server answered (to `from`) at once.
  Outcome Deliver(const Udp::endpoint& from, const std::vector<std::uint8_t>& datagram) {
    using namespace rudp::detail;
    m_lastReply.clear();
    m_server.Deliver(from, datagram);
    if (m_lastReply.empty() || m_lastReplyTo != from) return Outcome::Nothing;
    DecodedPacket packet;
    if (DecodePacket(m_lastReply.data(), m_lastReply.size(), packet) != DecodeStatus::Ok) {
      return Outcome::Nothing;
    }
    switch (packet.header.type) {
      case PacketType::Welcome:
        return Outcome::Welcome;
      case PacketType::Refusal:
        return Outcome::Refusal;
      case PacketType::Cookie:
        return Outcome::Cookie;
      default:
        return Outcome::Nothing;
    }
  }

  const std::vector<std::uint8_t>& LastReply() const noexcept { return m_lastReply; }

 private:
  SimulatedNetwork& m_network;
  SimulatedHost& m_server;
  std::vector<std::uint8_t> m_lastReply;
  Udp::endpoint m_lastReplyTo;
};

}  // namespace timerwheel::test
