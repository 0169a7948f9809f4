#include "TransportBenchmark/SocketAttacker.h"

#include <boost/asio/buffer.hpp>
#include <chrono>
#include <thread>

namespace timerwheel::perf {

namespace detail = rudp::detail;
using Udp = boost::asio::ip::udp;

SocketAttacker::SocketAttacker(const Udp::endpoint& local, const Udp::endpoint& server)
    : m_socket(m_io, local), m_server(server) {
  m_socket.non_blocking(true);
  // Room for what the server answers between two drains at 1 MB/s.
  m_socket.set_option(boost::asio::socket_base::receive_buffer_size(4 << 20));
}

void SocketAttacker::Send(const Bytes& datagram) {
  boost::system::error_code error;
  m_socket.send_to(boost::asio::buffer(datagram), m_server, 0, error);
  if (error) return;  // would block: the attacker's own socket buffer is full; not counted
  bytesSent += datagram.size();
  ++datagramsSent;
}

bool SocketAttacker::ReceiveOne(Bytes& buffer) {
  boost::system::error_code error;
  Udp::endpoint from;
  const std::size_t size = m_socket.receive_from(boost::asio::buffer(buffer), from, 0, error);
  if (error) return false;
  Record(buffer.data(), size);
  return true;
}

void SocketAttacker::Drain() {
  while (ReceiveOne(m_buffer)) {
  }
}

void SocketAttacker::Record(const std::uint8_t* data, std::size_t size) {
  bytesReceived += size;
  ++datagramsReceived;
  detail::DecodedPacket packet;
  if (detail::DecodePacket(data, size, packet) != detail::DecodeStatus::Ok) return;
  const detail::PacketHeader& header = packet.header;
  switch (header.type) {
    case detail::PacketType::Cookie:
      ++cookies;
      m_cookies.emplace_back(header.destination, header.cookie);
      return;
    case detail::PacketType::Welcome: {
      ++welcomes;
      if (m_sessionOf.count(header.destination) != 0) return;  // a repeated Welcome
      Session session;
      session.clientId = header.destination;
      session.serverId = header.source;
      m_sessionOf.emplace(session.clientId, sessions.size());
      m_welcomed.push_back(sessions.size());
      sessions.push_back(std::move(session));
      return;
    }
    case detail::PacketType::Refusal:
      ++refusals;
      return;
    case detail::PacketType::Reset:
      ++resets;
      return;
    case detail::PacketType::Data:
      break;
    default:
      return;
  }
  const auto found = m_sessionOf.find(header.destination);
  if (found == m_sessionOf.end()) return;
  Session& session = sessions[found->second];
  session.seen.insert(header.packetNumber);
  while (session.seen.size() > 4096) session.seen.erase(session.seen.begin());
  bool carriesStream = false;
  detail::FrameReader reader(packet.frames, packet.framesSize);
  detail::Frame frame;
  while (!reader.AtEnd() && reader.Next(frame) == detail::DecodeStatus::Ok) {
    if (frame.type == detail::FrameType::Stream) carriesStream = true;
    if (frame.type == detail::FrameType::Close) session.closed = true;
  }
  if (!carriesStream) {
    session.withoutStream.push_back(header.packetNumber);
    if (session.withoutStream.size() > 64) session.withoutStream.pop_front();
  }
}

SocketAttacker::Bytes SocketAttacker::Hello() {
  Bytes hello(detail::kHelloSize);
  detail::PacketWriter writer(hello.data(), hello.size());
  writer.BeginHello(++m_nextClientId);
  hello.resize(writer.Finish());
  return hello;
}

SocketAttacker::Bytes SocketAttacker::HelloWithCookie(ConnectionId clientId, const Cookie& cookie) {
  detail::TransportParameters parameters;
  // A long ACK delay keeps the server's records of unacknowledged packets for longer (3 PTOs);
  // a large window lets it send.
  parameters.maxAckDelayMs = 999;
  parameters.initialMaxData = 16 << 20;
  parameters.maxDatagramSize = 1200;
  parameters.idleTimeoutMs = 30'000;
  parameters.maxMessageSize = 1 << 20;
  Bytes datagram(detail::kHelloSize);
  detail::PacketWriter writer(datagram.data(), datagram.size());
  writer.BeginHelloWithCookie(clientId, cookie, parameters);
  datagram.resize(writer.Finish());
  if (firstHelloWithCookie.empty()) firstHelloWithCookie = datagram;
  return datagram;
}

bool SocketAttacker::NextHelloWithCookie(Bytes& out) {
  if (m_cookies.empty()) return false;
  out = HelloWithCookie(m_cookies.front().first, m_cookies.front().second);
  m_cookies.pop_front();
  return true;
}

bool SocketAttacker::NextWelcomed(std::size_t& session) {
  if (m_welcomed.empty()) return false;
  session = m_welcomed.front();
  m_welcomed.pop_front();
  return true;
}

int SocketAttacker::Connect() {
  // Waits for what Drain records; the attacker's own thread, so polling costs nothing measured.
  auto waitFor = [this](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      Drain();
    }
    return true;
  };
  const std::uint64_t refusalsBefore = refusals;
  Send(Hello());
  Bytes second;
  if (!waitFor([&] { return NextHelloWithCookie(second) || refusals != refusalsBefore; }) ||
      second.empty()) {
    return -1;
  }
  Send(second);
  std::size_t session = 0;
  if (!waitFor([&] { return NextWelcomed(session) || refusals != refusalsBefore; }) ||
      refusals != refusalsBefore) {
    return -1;
  }
  return static_cast<int>(session);
}

SocketAttacker::Bytes SocketAttacker::DataPacket(
    Session& session, const std::function<void(detail::PacketWriter&)>& frames, std::size_t padTo) {
  Bytes datagram(1200);
  detail::PacketWriter writer(datagram.data(), datagram.size());
  writer.BeginData(session.serverId, session.nextPacketNumber++);
  if (padTo != 0) writer.PadTo(padTo);
  frames(writer);
  datagram.resize(writer.Finish());
  return datagram;
}

std::vector<detail::AckRange> SocketAttacker::SeenRanges(const Session& session,
                                                         PacketNumber floor) {
  std::vector<detail::AckRange> ranges;
  for (auto it = session.seen.rbegin();
       it != session.seen.rend() && *it > floor && ranges.size() <= detail::kMaxAckRanges; ++it) {
    if (!ranges.empty() && ranges.back().smallest == *it + 1) {
      ranges.back().smallest = *it;
    } else {
      ranges.push_back(detail::AckRange{*it, *it});
    }
  }
  if (ranges.size() > detail::kMaxAckRanges) ranges.resize(detail::kMaxAckRanges);
  return ranges;
}

}  // namespace timerwheel::perf
