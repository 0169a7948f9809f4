// ReliableUDP against hostile traffic on a simulated network: garbage, truncated, oversized and
// bit-flipped datagrams, unknown connection IDs, replays, optimistic and overflowing ACKs,
// overlapping and oversized fragments, unbounded reassembly, and a spoofed handshake flood.
// Each is dropped and counted, never crashes, and never delivers corrupted or duplicated data.
#include <array>
#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <vector>

#include "ReliableUDP/Detail/Crc32c.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/HandshakeDatagrams.h"
#include "ReliableUDP/Support/HostileHarness.h"
#include "ReliableUDP/Support/MessageStream.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"
#include "Support/AllocationCounter.h"

using namespace timerwheel;
using namespace timerwheel::test;
using namespace timerwheel::rudp::detail;
using rudp::Connection;
using rudp::Error;

namespace {

constexpr Microseconds kSecond = 1'000'000;

std::uint64_t Dropped(const rudp::EndpointStatistics& s) {
  return s.droppedMalformed + s.droppedBadChecksum + s.droppedUnknownConnection +
         s.droppedBadCookie + s.droppedNotAccepting + s.droppedBacklogFull + s.droppedUnexpected +
         s.droppedProtocolViolation + s.droppedTooFragmented + s.droppedWrongAddress +
         s.droppedOversize + s.droppedSourcePortZero;
}

void PutVarInt(std::vector<std::uint8_t>& out, std::uint64_t value) {
  // Always the 8-byte form: decoders must accept non-minimal encodings.
  for (int i = 7; i >= 0; --i) {
    auto byte = static_cast<std::uint8_t>(value >> (8 * i));
    if (i == 7) byte = static_cast<std::uint8_t>((byte & 0x3F) | 0xC0);
    out.push_back(byte);
  }
}

// A Data packet with arbitrary (possibly malformed) frame bytes and a valid checksum, so that it
// gets past the checksum and is judged on its contents.
std::vector<std::uint8_t> RawDataPacket(ConnectionId destination, PacketNumber number,
                                        const std::vector<std::uint8_t>& frames) {
  std::vector<std::uint8_t> datagram;
  datagram.push_back(static_cast<std::uint8_t>((kProtocolVersion << 4) | 4));
  for (int i = 7; i >= 0; --i)
    datagram.push_back(static_cast<std::uint8_t>(destination >> (8 * i)));
  PutVarInt(datagram, number);
  datagram.insert(datagram.end(), frames.begin(), frames.end());
  const std::uint32_t crc = Crc32c(datagram.data(), datagram.size());
  for (int i = 3; i >= 0; --i) datagram.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
  return datagram;
}

std::vector<std::uint8_t> StreamFrameBytes(std::uint64_t offset,
                                           const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> frame{static_cast<std::uint8_t>(FrameType::Stream)};
  PutVarInt(frame, offset);
  PutVarInt(frame, data.size());
  frame.insert(frame.end(), data.begin(), data.end());
  return frame;
}

// A client and a server with one connection, and what the tap learned: both connection IDs and
// every Data datagram the client sent.
struct Wiretapped {
  explicit Wiretapped(SimulatedNetwork& network_) : network(network_) {
    rudp::EndpointOptions serverOptions;
    serverOptions.acceptIncoming = true;
    server = &network.AddHost(9000, serverOptions);
    client = &network.AddHost(9001);
    network.tap = [this](const Udp::endpoint& from, const Udp::endpoint&,
                         const std::vector<std::uint8_t>& datagram) {
      DecodedPacket packet;
      if (DecodePacket(datagram.data(), datagram.size(), packet) != DecodeStatus::Ok) return;
      if (packet.header.type != PacketType::Data) return;
      if (from == client->Address()) {
        serverId = packet.header.destination;
        clientPackets.push_back(datagram);
        clientLargest = std::max(clientLargest, packet.header.packetNumber);
      } else {
        clientId = packet.header.destination;
        serverLargest = std::max(serverLargest, packet.header.packetNumber);
      }
    };
    server->Accept([this](boost::system::error_code, std::shared_ptr<Connection> c) {
      serverSide = std::move(c);
    });
    client->Connect(server->Address(),
                    [this](boost::system::error_code, std::shared_ptr<Connection> c) {
                      clientSide = std::move(c);
                    });
    network.RunFor(10 * kSecond, [this] { return clientSide && serverSide; });
  }

  // Sends `count` pattern messages client -> server and checks them.
  bool Transfer(std::uint64_t count, std::shared_ptr<MessageStream>* keep = nullptr) {
    auto stream = std::make_shared<MessageStream>(clientSide, serverSide, count);
    stream->Start();
    const bool done = network.RunFor(120 * kSecond, [&] { return stream->Done(); });
    if (keep != nullptr) *keep = stream;
    return done && stream->Error().empty() && stream->Received() == count;
  }

  SimulatedNetwork& network;
  SimulatedHost* server = nullptr;
  SimulatedHost* client = nullptr;
  std::shared_ptr<Connection> clientSide, serverSide;
  ConnectionId serverId = 0, clientId = 0;
  PacketNumber clientLargest = 0, serverLargest = 0;
  std::vector<std::vector<std::uint8_t>> clientPackets;
};

}  // namespace

TEST_CASE("garbage truncated oversized and bit-flipped datagrams are dropped and counted",
          "[rudp][sim][hostile]") {
  SimulatedNetwork network(101);
  Wiretapped w(network);
  REQUIRE(w.clientSide);
  REQUIRE(w.Transfer(20));
  REQUIRE(!w.clientPackets.empty());

  std::mt19937_64 random(5);
  std::vector<std::vector<std::uint8_t>> hostile;
  for (int i = 0; i < 2000; ++i) {  // garbage of every size, some with a plausible first byte
    std::vector<std::uint8_t> datagram(random() % 1500);
    for (auto& byte : datagram) byte = static_cast<std::uint8_t>(random());
    if (!datagram.empty() && i % 2 == 0) datagram[0] = static_cast<std::uint8_t>(0x14);
    hostile.push_back(std::move(datagram));
  }
  hostile.push_back(std::vector<std::uint8_t>(65'000, 0x14));  // oversized
  for (const auto& real : w.clientPackets) {
    for (std::size_t size = 0; size < real.size(); size += 7) {  // truncated
      hostile.emplace_back(real.begin(), real.begin() + static_cast<std::ptrdiff_t>(size));
    }
    auto flipped = real;  // one bit flipped: the checksum must catch it
    flipped[random() % flipped.size()] ^= static_cast<std::uint8_t>(1u << (random() % 8));
    hostile.push_back(std::move(flipped));
  }

  const auto before = Dropped(w.server->Statistics());
  for (const auto& datagram : hostile) w.server->Deliver(w.client->Address(), datagram);
  const auto after = w.server->Statistics();
  CHECK(Dropped(after) - before == hostile.size());
  CHECK(after.connectionsOpen == 1);

  // Nothing changed: the connection carries on, intact.
  REQUIRE(w.Transfer(20));
}

TEST_CASE("valid headers with unknown connection IDs are dropped and counted",
          "[rudp][sim][hostile]") {
  SimulatedNetwork network(103);
  Wiretapped w(network);
  REQUIRE(w.clientSide);
  REQUIRE(w.Transfer(5));  // the tap learns the connection IDs
  REQUIRE(w.serverId != 0);
  const auto before = w.server->Statistics().droppedUnknownConnection;
  std::mt19937_64 random(7);
  for (int i = 0; i < 1000; ++i) {
    w.server->Deliver(w.client->Address(),
                      RawDataPacket(random() | 1, 1, {static_cast<std::uint8_t>(FrameType::Ping)}));
  }
  CHECK(w.server->Statistics().droppedUnknownConnection - before == 1000);
  // The right ID from the wrong address is refused too (no migration, no injection).
  const Udp::endpoint elsewhere(boost::asio::ip::make_address_v4("10.0.0.9"), 9001);
  const auto wrongBefore = w.server->Statistics();
  w.server->Deliver(elsewhere,
                    RawDataPacket(w.serverId, 999, {static_cast<std::uint8_t>(FrameType::Ping)}));
  CAPTURE(w.serverId, Dropped(w.server->Statistics()) - Dropped(wrongBefore));
  CHECK(w.server->Statistics().droppedWrongAddress == wrongBefore.droppedWrongAddress + 1);
  REQUIRE(w.Transfer(10));
}

TEST_CASE("replayed packets deliver nothing twice", "[rudp][sim][hostile]") {
  SimulatedNetwork network(107);
  Wiretapped w(network);
  REQUIRE(w.clientSide);
  REQUIRE(w.Transfer(30));
  const auto replay = w.clientPackets;
  const auto duplicatesBefore = w.serverSide->GetStatistics().duplicatePacketsReceived;
  std::vector<std::uint8_t> extra;
  bool delivered = false;
  w.serverSide->AsyncReceive(extra, [&](boost::system::error_code ec) { delivered = !ec; });
  for (const auto& datagram : replay) w.server->Deliver(w.client->Address(), datagram);
  network.RunFor(5 * kSecond);
  CHECK_FALSE(delivered);  // every message was already delivered once
  CHECK(w.serverSide->GetStatistics().duplicatePacketsReceived - duplicatesBefore >=
        replay.size() - 40);  // all but the oldest, which fall below the ACK floor as replays
  // The connection still works, and the pending receive gets the next real message.
  std::vector<std::uint8_t> one = PatternMessage(0, 10);
  w.clientSide->AsyncSend(boost::asio::buffer(one), [](boost::system::error_code) {});
  REQUIRE(network.RunFor(5 * kSecond, [&] { return delivered; }));
  CHECK(extra == one);
}

TEST_CASE("ACKs of packets never sent and ACK ranges that overflow are dropped and counted",
          "[rudp][sim][hostile]") {
  SimulatedNetwork network(109);
  Wiretapped w(network);
  REQUIRE(w.clientSide);
  REQUIRE(w.Transfer(10));
  PacketNumber pn = w.clientLargest + 1000;  // numbers the server has not seen yet

  SECTION("an optimistic ACK changes nothing, and a peer that keeps sending them is cut off") {
    std::vector<std::uint8_t> ack{static_cast<std::uint8_t>(FrameType::Ack)};
    PutVarInt(ack, w.serverLargest + 100'000);  // largest: never sent by the server
    PutVarInt(ack, 0);                          // delay
    PutVarInt(ack, 0);                          // no further ranges
    PutVarInt(ack, 10);                         // first range
    const auto before = w.server->Statistics().droppedProtocolViolation;
    const auto cwnd = w.serverSide->GetStatistics().congestionWindow;
    w.server->Deliver(w.client->Address(), RawDataPacket(w.serverId, pn++, ack));
    CHECK(w.server->Statistics().droppedProtocolViolation == before + 1);
    CHECK(w.serverSide->GetStatistics().congestionWindow == cwnd);
    REQUIRE(w.Transfer(5));
    bool ended = false;
    boost::system::error_code reason;
    w.serverSide->AsyncWaitClosed([&](boost::system::error_code ec) {
      ended = true;
      reason = ec;
    });
    for (int i = 0; i < 200 && !ended; ++i) {
      w.server->Deliver(w.client->Address(), RawDataPacket(w.serverId, pn++, ack));
      network.RunPosted();
    }
    CHECK(ended);
    CHECK(reason == Error::ProtocolError);
  }
  SECTION("ACK ranges that run below zero are malformed") {
    std::vector<std::uint8_t> ack{static_cast<std::uint8_t>(FrameType::Ack)};
    PutVarInt(ack, 5);   // largest
    PutVarInt(ack, 0);   // delay
    PutVarInt(ack, 1);   // one more range
    PutVarInt(ack, 3);   // first range: 2..5
    PutVarInt(ack, 10);  // gap: below zero
    PutVarInt(ack, 0);
    const auto before = w.server->Statistics().droppedMalformed;
    w.server->Deliver(w.client->Address(), RawDataPacket(w.serverId, pn++, ack));
    CHECK(w.server->Statistics().droppedMalformed == before + 1);
    REQUIRE(w.Transfer(5));
  }
  SECTION("window advertisements smaller or absurdly larger change nothing harmful") {
    for (std::uint64_t limit : {std::uint64_t{0}, std::uint64_t{1}, kMaxVarInt}) {
      std::vector<std::uint8_t> frame{static_cast<std::uint8_t>(FrameType::MaxData)};
      PutVarInt(frame, limit);
      w.server->Deliver(w.client->Address(), RawDataPacket(w.serverId, pn++, frame));
    }
    REQUIRE(w.Transfer(20));
  }
}

TEST_CASE("overlapping oversized and never-completing fragments are bounded and harmless",
          "[rudp][sim][hostile]") {
  SimulatedNetwork network(113);
  Wiretapped w(network);
  REQUIRE(w.clientSide);
  REQUIRE(w.Transfer(20));
  PacketNumber pn = w.clientLargest + 1000;
  const std::uint64_t end = w.clientSide->GetStatistics().streamBytesSent;  // all delivered

  SECTION("fragments overlapping delivered data with other bytes change nothing") {
    // (Only bytes already received: without cryptography, a party that can see the traffic
    // and spoof the client's address could write bytes the stream has not reached yet; the
    // random connection ID and the address check keep everyone else out. See the docs.)
    for (std::uint64_t offset = 0; offset + 700 <= end; offset += 500) {
      w.server->Deliver(
          w.client->Address(),
          RawDataPacket(w.serverId, pn++,
                        StreamFrameBytes(offset, std::vector<std::uint8_t>(700, 0xEE))));
    }
    REQUIRE(w.Transfer(20));  // new messages arrive intact after the ones already delivered
  }
  SECTION("a message longer than the maximum ends the connection with ProtocolError") {
    bool ended = false;
    boost::system::error_code reason;
    w.serverSide->AsyncWaitClosed([&](boost::system::error_code ec) {
      ended = true;
      reason = ec;
    });
    std::vector<std::uint8_t> received;
    w.serverSide->AsyncReceive(received, [](boost::system::error_code) {});
    w.server->Deliver(
        w.client->Address(),
        RawDataPacket(w.serverId, pn++, StreamFrameBytes(end, {0xBF, 0xFF, 0xFF, 0xFF})));
    network.RunFor(kSecond, [&] { return ended; });
    CHECK(ended);
    CHECK(reason == Error::ProtocolError);
  }
  SECTION("fragments beyond the window are refused") {
    const auto before = w.server->Statistics().droppedProtocolViolation;
    w.server->Deliver(
        w.client->Address(),
        RawDataPacket(w.serverId, pn++,
                      StreamFrameBytes(end + (64u << 20), std::vector<std::uint8_t>(10, 1))));
    CHECK(w.server->Statistics().droppedProtocolViolation == before + 1);
  }
  SECTION("scattered fragments that never complete hold bounded memory") {
    auto& pool = w.server->Core().Context().pool;
    const auto droppedBefore = w.server->Statistics().droppedTooFragmented;
    for (int i = 0; i < 2000; ++i) {  // 1-byte islands 1 KB apart, a message that never ends
      w.server->Deliver(
          w.client->Address(),
          RawDataPacket(w.serverId, pn++,
                        StreamFrameBytes(end + 10 + 1024 * static_cast<std::uint64_t>(i), {0x42})));
    }
    CHECK(w.server->Statistics().droppedTooFragmented - droppedBefore >= 2000 - 256);
    // The default window is 2 MiB: at most its chunks, never more.
    CHECK(pool.ChunksInUse() <= (2u << 20) / ChunkPool::kChunkSize + 1);
  }
}

// Nothing can be sent to port 0 (Linux fails the send with EINVAL), so a datagram from it is
// spoofed. Answered, two of them in one read went out as one segmented run the kernel refused,
// which turned the shard's segmentation offload off for good: a remote sender changed the
// endpoint's configuration. Every path into the engine goes through EndpointCore::OnDatagram.
TEST_CASE("datagrams from source port 0 are dropped where they enter the engine, unanswered",
          "[rudp][sim][hostile][handshake]") {
  SimulatedNetwork network(131);
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  SimulatedHost& server = network.AddHost(9000, options);
  std::uint64_t toPortZero = 0;
  network.tap = [&](const Udp::endpoint&, const Udp::endpoint& to,
                    const std::vector<std::uint8_t>&) { toPortZero += to.port() == 0 ? 1 : 0; };
  const Udp::endpoint spoofed(boost::asio::ip::make_address_v4("10.0.0.7"), 0);
  server.Deliver(spoofed, HelloDatagram(0x1234));  // two Hellos: each would draw a Cookie
  server.Deliver(spoofed, HelloDatagram(0x5678));
  std::array<std::uint8_t, kCookieSize> forged{};
  server.Deliver(spoofed, HelloWithCookieDatagram(0x1234, forged));
  // A Data packet for no connection, large enough to draw a stateless Reset.
  server.Deliver(spoofed, RawDataPacket(0x4242'4242, 7, std::vector<std::uint8_t>(200, 0)));
  network.RunFor(kSecond);
  const auto stats = server.Statistics();
  CHECK(stats.droppedSourcePortZero == 4);
  CHECK(stats.datagramsReceived == 4);
  CHECK(Dropped(stats) == 4);
  CHECK(stats.cookiesSent == 0);
  CHECK(stats.statelessResetsSent == 0);
  CHECK(stats.datagramsSent == 0);
  CHECK(toPortZero == 0);

  // A real client still connects.
  SimulatedHost& client = network.AddHost(9001);
  std::shared_ptr<Connection> accepted, connected;
  server.Accept([&](boost::system::error_code, std::shared_ptr<Connection> c) { accepted = c; });
  client.Connect(server.Address(),
                 [&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                   if (!ec) connected = c;
                 });
  CHECK(network.RunFor(10 * kSecond, [&] { return connected && accepted; }));
}

TEST_CASE("a spoofed handshake flood creates no state and a real client still connects",
          "[rudp][sim][hostile][handshake]") {
  SimulatedNetwork network(127);
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  SimulatedHost& server = network.AddHost(9000, options);
  SimulatedHost& client = network.AddHost(9001);
  std::shared_ptr<Connection> accepted, connected;
  server.Accept([&](boost::system::error_code, std::shared_ptr<Connection> c) { accepted = c; });

  std::vector<std::uint8_t> hello(kHelloSize);
  for (std::uint32_t i = 0; i < 100'000; ++i) {
    // Spoofed sources: 10.0.x.y, many ports; each gets a cookie it will never see.
    const Udp::endpoint from(boost::asio::ip::address_v4(0x0A000000u | (i >> 4)),
                             static_cast<unsigned short>(10'000 + i % 50'000));
    PacketWriter writer(hello.data(), hello.size());
    writer.BeginHello(0x1000'0000ull + i);
    hello.resize(writer.Finish());
    server.Deliver(from, hello);
    if (i == 50'000) {
      client.Connect(server.Address(),
                     [&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                       if (!ec) connected = c;
                     });
      network.RunFor(kSecond, [&] { return connected && accepted; });
    }
  }
  REQUIRE(network.RunFor(10 * kSecond, [&] { return connected && accepted; }));
  const auto stats = server.Statistics();
  CHECK(stats.cookiesSent >= 100'000);
  CHECK(stats.connectionsOpen == 1);
  CHECK(server.Core().Context().pool.ChunksAllocated() <= 1);
  // The flood cost replies, never state: tiny replies, nothing kept.
  CHECK(stats.bytesSent * 20 < stats.bytesReceived);
}

// A Cookie needs no key, so anyone who has seen a client's Hello can send it Cookies from the
// server's address. Each one answered would draw a 1,200-byte HelloWithCookie (32x its 37 bytes,
// without end), and a forged one after the real one would replace the client's cookie, so that the
// server dropped every later HelloWithCookie and the connect timed out. The client keeps the first
// (RFC 9000 allows one Retry per connect attempt) and drops the rest, counted.
TEST_CASE(
    "a connecting client answers one Cookie, and later ones neither draw replies nor "
    "replace it",
    "[rudp][sim][hostile][handshake]") {
  SimulatedNetwork network(131);
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  SimulatedHost& server = network.AddHost(9000, options);
  SimulatedHost& client = network.AddHost(9001);
  std::shared_ptr<Connection> accepted, connected;
  server.Accept([&](boost::system::error_code, std::shared_ptr<Connection> c) { accepted = c; });

  // The server's first Cookie is held back, so that the forgeries can arrive after the real one
  // and before the client's HelloWithCookie reaches the server.
  bool holdServerReplies = true;
  std::vector<std::vector<std::uint8_t>> held;
  ConnectionId clientId = 0;
  std::size_t hellosWithCookie = 0;
  network.tap = [&](const Udp::endpoint& from, const Udp::endpoint& to,
                    const std::vector<std::uint8_t>& datagram) {
    DecodedPacket packet;
    if (DecodePacket(datagram.data(), datagram.size(), packet) != DecodeStatus::Ok) return;
    if (to == server.Address() && packet.header.type == PacketType::Hello) {
      clientId = packet.header.source;
    }
    if (to == server.Address() && packet.header.type == PacketType::HelloWithCookie) {
      ++hellosWithCookie;
    }
    if (from == server.Address() && holdServerReplies) held.push_back(datagram);
  };
  network.Link(server.Address(), client.Address()).loss = 1.0;  // the tap still sees them
  client.Connect(server.Address(),
                 [&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                   if (!ec) connected = c;
                 });
  REQUIRE(network.RunFor(100'000, [&] { return !held.empty(); }));
  REQUIRE(clientId != 0);
  network.Link(server.Address(), client.Address()).loss = 0.0;
  holdServerReplies = false;

  client.Deliver(server.Address(), held.front());  // the real Cookie: one HelloWithCookie
  std::array<std::uint8_t, kCookieSize> forged{};
  forged.fill(0xAB);
  const std::uint64_t droppedBefore = client.Statistics().droppedUnexpected;
  for (int i = 0; i < 1000; ++i) client.Deliver(server.Address(), CookieDatagram(clientId, forged));
  CHECK(client.Statistics().droppedUnexpected - droppedBefore == 1000);
  REQUIRE(network.RunFor(10 * kSecond, [&] { return connected && accepted; }));
  CHECK(hellosWithCookie == 1);
  CHECK(server.Statistics().droppedBadCookie == 0);
}

// An idle server connection gives back its ACK ranges' room at the peer's keepalive. PINGs that
// each skip a packet number (and acknowledge our last ACK, so that the gaps count as reported)
// made it give the room back and take it again at every datagram: three allocations each. It
// waits for a quiet spell from the peer now.
TEST_CASE("lone PINGs that skip packet numbers make an idle server allocate nothing per datagram",
          "[rudp][sim][hostile]") {
  // Allocations per 100 datagrams, PINGs in order and PINGs each skipping a number.
  const auto allocationsFor = [](PacketNumber step) {
    SimulatedNetwork network(4244);
    HostileHarness harness(network, rudp::EndpointOptions{}, 1);
    REQUIRE(harness.serverSides.size() == 1);
    network.Link(harness.client->Address(), harness.server->Address()).down = true;
    const ConnectionId id = harness.ServerIds().front();
    PacketNumber next = harness.clientLargest[id] + 1;
    PacketNumber serverLargest = 0;
    bool heardServer = false;
    std::size_t allocations = 0;
    const auto round = [&] {
      for (const auto& datagram : harness.serverPackets) {
        DecodedPacket packet;
        if (DecodePacket(datagram.data(), datagram.size(), packet) != DecodeStatus::Ok ||
            packet.header.type != PacketType::Data) {
          continue;
        }
        serverLargest = heardServer ? std::max(serverLargest, packet.header.packetNumber)
                                    : packet.header.packetNumber;
        heardServer = true;
      }
      next += step;
      const auto datagram = WriteDataPacket(nullptr, id, next, [&](PacketWriter& writer) {
        if (heardServer) {
          const AckRange range{serverLargest, serverLargest};
          REQUIRE(writer.AppendAck(&range, 1, 0));
        }
        REQUIRE(writer.AppendPing());
      });
      harness.serverPackets.clear();
      harness.serverPackets.reserve(16);
      {
        const CountAllocations counting;
        harness.server->Deliver(harness.client->Address(), datagram);
        allocations += counting.Count();
      }
      network.RunFor(1000);
    };
    for (int i = 0; i < 20; ++i) round();  // warm
    allocations = 0;
    for (int i = 0; i < 100; ++i) round();
    CHECK(harness.server->Statistics().droppedProtocolViolation == 0);
    return allocations;
  };
  const std::size_t inOrder = allocationsFor(1);  // the simulation's own copies, the same both ways
  const std::size_t skipping = allocationsFor(2);
  INFO("allocations per 100 datagrams: " << inOrder << " in order, " << skipping << " skipping");
  CHECK(skipping <= inOrder);
}
