// An attacker with a UDP socket of its own, speaking ReliableUDP's documented wire format with the
// engine's own encoder (Detail/WireFormat.h), as a script on the network would: raw handshakes,
// Data packets with any frames, and a record of what the server sent back. Used by the hostile
// part of the transport benchmark over real loopback sockets (HostileSocketWorkload).
//
// Thread safety: none; one thread (the attacker's own) uses it.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <unordered_map>
#include <vector>

#include "ReliableUDP/Detail/WireFormat.h"

namespace timerwheel::perf {

class SocketAttacker {
 public:
  using Bytes = std::vector<std::uint8_t>;
  using ConnectionId = rudp::detail::ConnectionId;
  using PacketNumber = rudp::detail::PacketNumber;
  using Cookie = std::array<std::uint8_t, rudp::detail::kCookieSize>;

  // One connection the attacker opened by hand.
  struct Session {
    ConnectionId clientId = 0;  // ours: the destination of what the server sends us
    ConnectionId serverId = 0;  // the server's: the destination of what we send
    PacketNumber nextPacketNumber = 0;
    std::set<PacketNumber> seen;             // the newest numbers of the server's Data packets
    std::deque<PacketNumber> withoutStream;  // received, carrying no STREAM frame, not yet acked
    bool closed = false;                     // the server sent a CLOSE
  };

  // Binds `local` (a loopback address of its own, so that the server counts it as another source
  // than the legitimate client) and aims at `server`.
  SocketAttacker(const boost::asio::ip::udp::endpoint& local,
                 const boost::asio::ip::udp::endpoint& server);

  void Send(const Bytes& datagram);
  // Reads every datagram waiting on the socket and records it (counters, sessions, cookies and
  // Welcomes for pipelined handshakes).
  void Drain();

  // A whole handshake, waiting (up to 2 s) for each answer: the new session's index, or -1 if the
  // server refused or said nothing.
  int Connect();
  // Pipelined handshakes: a Hello for a new client ID, and the HelloWithCookie answering a Cookie
  // that Drain recorded (false if none is waiting).
  Bytes Hello();
  bool NextHelloWithCookie(Bytes& out);
  // The session of a Welcome that Drain recorded since the last call (false if none).
  bool NextWelcomed(std::size_t& session);

  // A Data packet of `session` (its next packet number) with `frames`, padded to `padTo` bytes.
  Bytes DataPacket(Session& session, const std::function<void(rudp::detail::PacketWriter&)>& frames,
                   std::size_t padTo = 0);
  // The newest runs (at most kMaxAckRanges) of the numbers `session` saw above `floor`, as ACK
  // ranges, descending.
  static std::vector<rudp::detail::AckRange> SeenRanges(const Session& session, PacketNumber floor);

  std::vector<Session> sessions;
  // The HelloWithCookie of the first session, to be forged.
  Bytes firstHelloWithCookie;
  // What went through the socket, both ways, and what the server answered by type.
  std::uint64_t bytesSent = 0, datagramsSent = 0, bytesReceived = 0, datagramsReceived = 0;
  std::uint64_t cookies = 0, welcomes = 0, refusals = 0, resets = 0;

 private:
  bool ReceiveOne(Bytes& buffer);
  void Record(const std::uint8_t* data, std::size_t size);
  Bytes HelloWithCookie(ConnectionId clientId, const Cookie& cookie);

  boost::asio::io_context m_io;
  boost::asio::ip::udp::socket m_socket;
  boost::asio::ip::udp::endpoint m_server;
  ConnectionId m_nextClientId = 0x5EED000000000000;
  std::unordered_map<ConnectionId, std::size_t> m_sessionOf;  // by client ID
  std::deque<std::pair<ConnectionId, Cookie>> m_cookies;
  std::deque<std::size_t> m_welcomed;
  Bytes m_buffer = Bytes(65536);
};

}  // namespace timerwheel::perf
