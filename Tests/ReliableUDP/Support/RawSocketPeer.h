// A peer with a real UDP socket of its own that speaks the wire format by hand (the engine's
// encoder), as an attacker's script would: the loopback counterpart of RawHandshake.
#pragma once

#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/HandshakeDatagrams.h"

namespace timerwheel::test {

class RawSocketPeer {
 public:
  using Udp = boost::asio::ip::udp;
  using Bytes = std::vector<std::uint8_t>;

  RawSocketPeer(const Udp::endpoint& local, const Udp::endpoint& server)
      : m_socket(m_io, local), m_server(server) {
    // Room for every reply of a burst until the test reads them (a reflector's included).
    m_socket.set_option(boost::asio::socket_base::receive_buffer_size(4 << 20));
  }

  void Send(const Bytes& datagram) {
    m_socket.send_to(boost::asio::buffer(datagram), m_server);
    bytesSent += datagram.size();
  }

  // The next datagram from the server, or nothing within `timeout` (generous: a reply on
  // loopback takes microseconds; the timeout only keeps a broken server from hanging the test).
  std::optional<Bytes> Receive(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    Bytes buffer(65536);
    std::optional<Bytes> result;
    Udp::endpoint from;
    m_socket.async_receive_from(boost::asio::buffer(buffer), from,
                                [&](const boost::system::error_code& error, std::size_t size) {
                                  if (error) return;
                                  buffer.resize(size);
                                  result = std::move(buffer);
                                });
    m_io.restart();
    m_io.run_for(timeout);
    if (!result) {
      m_socket.cancel();
      m_io.restart();
      m_io.run();  // the cancelled handler
    } else {
      bytesReceived += result->size();
    }
    return result;
  }

  // The type of a datagram the server sent (nullopt: it does not decode).
  static std::optional<rudp::detail::DecodedPacket> Decode(const Bytes& datagram) {
    rudp::detail::DecodedPacket packet;
    if (rudp::detail::DecodePacket(datagram.data(), datagram.size(), packet) !=
        rudp::detail::DecodeStatus::Ok) {
      return std::nullopt;
    }
    return packet;
  }

  // A whole handshake with client ID `clientId`: the server's connection ID on a Welcome,
  // nullopt on a Refusal or anything else.
  std::optional<rudp::detail::ConnectionId> Connect(rudp::detail::ConnectionId clientId) {
    using namespace rudp::detail;
    Send(HelloDatagram(clientId));
    const auto cookie = ReceiveDecoded();
    if (!cookie || cookie->header.type != PacketType::Cookie) return std::nullopt;
    Send(HelloWithCookieDatagram(clientId, cookie->header.cookie));
    const auto answer = ReceiveDecoded();
    if (!answer || answer->header.type != PacketType::Welcome) return std::nullopt;
    return answer->header.source;
  }

  // A Data packet to `destination` with one PING frame, padded to `padTo` bytes (0: not padded).
  static Bytes Ping(rudp::detail::ConnectionId destination, rudp::detail::PacketNumber number,
                    std::size_t padTo = 0) {
    using namespace rudp::detail;
    Bytes datagram(1200);
    PacketWriter writer(datagram.data(), datagram.size());
    writer.BeginData(destination, number);
    if (padTo != 0) writer.PadTo(padTo);
    writer.AppendPing();
    datagram.resize(writer.Finish());
    return datagram;
  }

  Udp::socket& Socket() { return m_socket; }
  std::uint64_t bytesSent = 0, bytesReceived = 0;

 private:
  std::optional<rudp::detail::DecodedPacket> ReceiveDecoded() {
    // The decoded packet points into the datagram for its frames: handshake replies have none.
    const auto datagram = Receive();
    if (!datagram) return std::nullopt;
    return Decode(*datagram);
  }

  boost::asio::io_context m_io;
  Udp::socket m_socket;
  Udp::endpoint m_server;
};

}  // namespace timerwheel::test
