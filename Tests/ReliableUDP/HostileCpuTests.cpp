// ReliableUDP against a hostile peer that spends the server's CPU or bandwidth (issue 14, items 1
// and 5-8): ACK frames that repeat what the server holds, datagrams larger than it accepts, a
// peer that never lets data through (slowloris), replays that draw ACKs (reflection), ACKs of
// packets never received (optimistic ACK), and a HelloWithCookie replayed with a forged cookie.
// Each test plays the attacker on the simulated network, with packets built by hand from the
// documented wire format, and asserts the bound with a counter. Those that make sense against a
// keyed server run twice (Plaintext, Encrypted): encrypted, the attacker seals its packets with
// the hijacked connection's own keys.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "ReliableUDP/Detail/ConnectionCore.h"
#include "ReliableUDP/Detail/PacketNumberSkipper.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/MessageStream.h"
#include "ReliableUDP/Support/PeerPackets.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"

using namespace timerwheel;
using namespace timerwheel::test;
using namespace timerwheel::rudp::detail;
using rudp::Connection;
using rudp::Error;

namespace {

constexpr Microseconds kSecond = 1'000'000;
constexpr Microseconds kMillisecond = 1'000;

// A server and a client with one connection. The tap learns both connection IDs and every Data
// packet number the server sends; once Hijack() is called, the client's own datagrams no longer
// reach the server and the test speaks for the client (same address, the server's connection ID,
// and on an encrypted connection the client's keys). serverStream is read from the frames in
// plaintext, and from the size when sealed.
struct Hijacked {
  static constexpr std::size_t kControlOnlyBytes = 400;

  explicit Hijacked(SimulatedNetwork& network_, rudp::EndpointOptions serverOptions = {},
                    rudp::EndpointOptions clientOptions = {})
      : network(network_) {
    serverOptions.acceptIncoming = true;
    server = &network.AddHost(9000, serverOptions);
    client = &network.AddHost(9001, clientOptions);
    network.tap = [this](const Udp::endpoint& from, const Udp::endpoint&,
                         const std::vector<std::uint8_t>& datagram) {
      DecodedPacket packet;
      if (DecodePacket(datagram.data(), datagram.size(), packet) != DecodeStatus::Ok) return;
      if (from == server->Address()) {
        ++serverDatagrams;
        serverBytes += datagram.size();
        if (packet.header.type == PacketType::Welcome) ++welcomes;
        if (packet.header.type != PacketType::Data && !IsSecureData(packet.header.type)) return;
        clientId = packet.header.destination;
        serverSent.insert(packet.header.packetNumber);
        if (packet.header.type != PacketType::Data) {
          // Sealed: told by size. ACK, PING and the other control frames take tens of bytes;
          // a packet near a full datagram carries stream data.
          if (datagram.size() > kControlOnlyBytes) serverStream.insert(packet.header.packetNumber);
          return;
        }
        FrameReader reader(packet.frames, packet.framesSize);
        Frame frame;
        while (!reader.AtEnd() && reader.Next(frame) == DecodeStatus::Ok) {
          if (frame.type == FrameType::Stream) serverStream.insert(packet.header.packetNumber);
        }
      } else if (from == client->Address()) {
        if (packet.header.type == PacketType::HelloWithCookie) helloWithCookie = datagram;
        if (packet.header.type == PacketType::Hello) clientId = packet.header.source;
        if (packet.header.type != PacketType::Data && !IsSecureData(packet.header.type)) return;
        serverId = packet.header.destination;
        clientLargest = std::max(clientLargest, packet.header.packetNumber);
        clientPackets.push_back(datagram);
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
  ~Hijacked() { network.tap = nullptr; }
  Hijacked(const Hijacked&) = delete;
  Hijacked& operator=(const Hijacked&) = delete;

  // Sends `count` pattern messages from `from` to `to` and checks them.
  bool Transfer(std::uint64_t count, bool toServer = true) {
    auto stream = toServer ? std::make_shared<MessageStream>(clientSide, serverSide, count)
                           : std::make_shared<MessageStream>(serverSide, clientSide, count);
    stream->Start();
    const bool done = network.RunFor(120 * kSecond, [&] { return stream->Done(); });
    return done && stream->Error().empty() && stream->Received() == count;
  }

  // From now on the real client's datagrams are lost; the test sends in its name.
  void Hijack() {
    LinkProfile down;
    down.down = true;
    network.SetLink(client->Address(), server->Address(), down);
    nextPacketNumber = clientLargest + 1;
    // The client's side may end meanwhile (nothing it sends arrives), and its endpoint then
    // forgets it; clientSide keeps it, and its keys, alive.
    sender = client->Core().FindConnection(clientId);
    REQUIRE(sender != nullptr);
  }

  // A Data packet from the client's address, with the next of the client's packet numbers
  // (sealed with the client's keys if the connection is encrypted).
  std::vector<std::uint8_t> Packet(const std::function<void(PacketWriter&)>& frames,
                                   std::size_t capacity = 1200) {
    if (sender == nullptr) sender = client->Core().FindConnection(clientId);
    REQUIRE(sender != nullptr);
    return WriteDataPacket(sender->Keys(), serverId, nextPacketNumber++, frames, capacity);
  }
  void Send(const std::vector<std::uint8_t>& datagram) {
    server->Deliver(client->Address(), datagram);
    network.RunPosted();
  }

  // The newest runs of packet numbers the server sent in [from, to], as ACK ranges (at most
  // kMaxAckRanges, descending): what a client that received all of them would acknowledge.
  // withStream false: only the packets that carried no stream data.
  std::vector<AckRange> SentRanges(PacketNumber from, PacketNumber to,
                                   bool withStream = true) const {
    std::vector<AckRange> ranges;
    auto it = serverSent.upper_bound(to);
    while (it != serverSent.begin() && ranges.size() < kMaxAckRanges) {
      --it;
      if (*it < from) break;
      if (!withStream && serverStream.count(*it) != 0) continue;
      if (!ranges.empty() && ranges.back().smallest == *it + 1) {
        ranges.back().smallest = *it;
      } else {
        ranges.push_back(AckRange{*it, *it});
      }
    }
    return ranges;
  }
  std::vector<std::uint8_t> AckPacket(const std::vector<AckRange>& ranges) {
    return Packet([&](PacketWriter& w) { REQUIRE(w.AppendAck(ranges.data(), ranges.size(), 0)); });
  }

  SimulatedNetwork& network;
  SimulatedHost* server = nullptr;
  SimulatedHost* client = nullptr;
  std::shared_ptr<Connection> clientSide, serverSide;
  ConnectionId serverId = 0, clientId = 0;
  PacketNumber clientLargest = 0;
  PacketNumber nextPacketNumber = 0;
  ConnectionCore* sender = nullptr;  // the client's side, whose keys seal what the test sends
  std::set<PacketNumber> serverSent;
  std::set<PacketNumber> serverStream;  // those of serverSent that carried stream data
  std::vector<std::vector<std::uint8_t>> clientPackets;
  std::vector<std::uint8_t> helloWithCookie;
  std::uint64_t serverDatagrams = 0, serverBytes = 0, welcomes = 0;
};

bool WaitClosed(SimulatedNetwork& network, Connection& connection, Microseconds within,
                boost::system::error_code& reason) {
  bool ended = false;
  connection.AsyncWaitClosed([&](boost::system::error_code ec) {
    ended = true;
    reason = ec;
  });
  network.RunFor(within, [&] { return ended; });
  return ended;
}

}  // namespace

// Item 1. The client leaves one packet unacknowledged, so its Lost record holds every later one
// (for 3 PTOs; a 999 ms max_ack_delay makes that 3 s), then sends ACK frames that repeat
// everything it acknowledged before. Each record must not be walked again per frame.
TEMPLATE_TEST_CASE("repeated ACK ranges cost O(ranges) however many sent packets are held",
                   "[rudp][sim][hostile][hostile-cpu]", Plaintext, Encrypted) {
  SimulatedNetwork network(1401);
  rudp::EndpointOptions serverOptions, clientOptions;
  clientOptions.maxAckDelay = 999;
  TestType::Configure(serverOptions, clientOptions);
  Hijacked h(network, serverOptions, clientOptions);
  REQUIRE(h.serverSide);
  CHECK(h.serverSide->GetStatistics().encrypted == TestType::kEncrypted);
  REQUIRE(h.Transfer(5));
  h.Hijack();

  // The server streams to the client; the attacker acknowledges all of it but the first packet.
  std::vector<std::uint8_t> big(512u << 10, 0x5A);
  for (int i = 0; i < 64; ++i) {  // 32 MB: more than it can send in the time
    h.serverSide->AsyncSend(boost::asio::buffer(big), [](boost::system::error_code) {});
  }
  network.RunPosted();
  REQUIRE(!h.serverSent.empty());
  const PacketNumber held = *h.serverSent.rbegin();  // never acknowledged: declared lost, kept
  const std::size_t before = h.serverSent.size();
  for (int round = 0; round < 500; ++round) {  // 2.5 s of virtual time, under the 3 PTOs
    network.RunFor(5 * kMillisecond);
    const auto ranges = h.SentRanges(held + 1, *h.serverSent.rbegin());
    if (!ranges.empty()) h.Send(h.AckPacket(ranges));
  }
  const std::size_t records = h.serverSent.size() - before;
  CAPTURE(records);
  REQUIRE(records > 1500);

  // Now the frames that repeat it all: the newest kMaxAckRanges runs, already acknowledged.
  const auto ranges = h.SentRanges(held + 1, *h.serverSent.rbegin());
  const std::uint64_t visitedBefore = h.serverSide->GetStatistics().ackRecordsVisited;
  constexpr int kFrames = 100;
  for (int i = 0; i < kFrames; ++i) h.Send(h.AckPacket(ranges));
  const std::uint64_t perFrame =
      (h.serverSide->GetStatistics().ackRecordsVisited - visitedBefore) / kFrames;
  CAPTURE(perFrame, ranges.size());
  // A binary search and a jump per range; the old walk visited every record held (> 1500).
  CHECK(perFrame <= ranges.size() * 24);
  CHECK(h.serverSide->GetStatistics().ackRecordsVisited > visitedBefore);
}

TEMPLATE_TEST_CASE("a packet with more than one ACK frame is dropped whole as a protocol violation",
                   "[rudp][sim][hostile][hostile-cpu]", Plaintext, Encrypted) {
  SimulatedNetwork network(1402);
  rudp::EndpointOptions serverOptions, clientOptions;
  TestType::Configure(serverOptions, clientOptions);
  Hijacked h(network, serverOptions, clientOptions);
  REQUIRE(h.serverSide);
  CHECK(h.serverSide->GetStatistics().encrypted == TestType::kEncrypted);
  REQUIRE(h.Transfer(10, /*toServer*/ false));
  h.Hijack();
  const auto ranges = h.SentRanges(0, *h.serverSent.rbegin());
  const auto before = h.server->Statistics();
  const auto received = h.serverSide->GetStatistics().packetsReceived;
  h.Send(h.Packet([&](PacketWriter& w) {
    for (int i = 0; i < 50; ++i) REQUIRE(w.AppendAck(ranges.data(), ranges.size(), 0));
  }));
  CHECK(h.server->Statistics().droppedProtocolViolation == before.droppedProtocolViolation + 1);
  CHECK(h.serverSide->GetStatistics().packetsReceived == received);  // not even recorded
  // One ACK frame is fine.
  h.Send(h.AckPacket(ranges));
  CHECK(h.serverSide->GetStatistics().packetsReceived == received + 1);
}

TEST_CASE("a datagram larger than maxDatagramSize is dropped before parsing, and counted",
          "[rudp][sim][hostile][hostile-cpu]") {
  SimulatedNetwork network(1403);
  Hijacked h(network);
  REQUIRE(h.serverSide);
  REQUIRE(h.Transfer(5));
  h.Hijack();
  const std::size_t limit = rudp::EndpointOptions{}.maxDatagramSize;
  const auto received = h.serverSide->GetStatistics().packetsReceived;
  const auto before = h.server->Statistics();
  // A valid packet in every other respect: a PING padded past the limit.
  std::vector<std::uint8_t> padded = h.Packet(
      [&](PacketWriter& w) {
        REQUIRE(w.AppendPing());
        while (w.FramesSize() < limit + 100) REQUIRE(w.AppendPing());
      },
      limit + 200);
  REQUIRE(padded.size() > limit);
  DecodedPacket decoded;
  REQUIRE(DecodePacket(padded.data(), padded.size(), decoded) == DecodeStatus::Ok);
  h.Send(padded);
  h.Send(std::vector<std::uint8_t>(65'000, 0x14));
  const auto after = h.server->Statistics();
  CHECK(after.droppedOversize == before.droppedOversize + 2);
  CHECK(after.droppedMalformed == before.droppedMalformed);
  CHECK(h.serverSide->GetStatistics().packetsReceived == received);
  // At the limit, it is an ordinary packet.
  h.Send(h.Packet([&](PacketWriter& w) { REQUIRE(w.AppendPing()); }));
  CHECK(h.serverSide->GetStatistics().packetsReceived == received + 1);
}

// Item 8. A HelloWithCookie for a live connection (same address and client connection ID) used
// to draw a Welcome without its cookie being checked.
TEST_CASE("a repeated HelloWithCookie is verified every time, also for a live connection",
          "[rudp][sim][hostile][hostile-cpu][handshake]") {
  SimulatedNetwork network(1408);
  Hijacked h(network);
  REQUIRE(h.serverSide);
  REQUIRE(h.Transfer(5));
  REQUIRE(!h.helloWithCookie.empty());
  DecodedPacket genuine;
  REQUIRE(DecodePacket(h.helloWithCookie.data(), h.helloWithCookie.size(), genuine) ==
          DecodeStatus::Ok);
  h.Hijack();

  // The same client ID and parameters, from the client's address, with a cookie never minted.
  auto forgedCookie = genuine.header.cookie;
  forgedCookie[0] ^= 0x5A;
  std::vector<std::uint8_t> forged(kHelloSize);
  PacketWriter writer(forged.data(), forged.size());
  writer.BeginHelloWithCookie(genuine.header.source, forgedCookie, genuine.header.parameters);
  forged.resize(writer.Finish());

  const auto welcomes = h.welcomes;
  const auto badCookies = h.server->Statistics().droppedBadCookie;
  for (int i = 0; i < 10; ++i) h.Send(forged);
  CHECK(h.welcomes == welcomes);
  CHECK(h.server->Statistics().droppedBadCookie == badCookies + 10);
  CHECK(h.server->Statistics().connectionsOpen == 1);

  // The genuine one, repeated (our Welcome was lost), still gets its Welcome again.
  h.Send(h.helloWithCookie);
  CHECK(h.welcomes == welcomes + 1);
}

// Item 7. Packet numbers have gaps the peer cannot predict; an ACK claiming one was received is
// a lie about what arrived (to inflate the sender's window) and ends the connection at once.
TEST_CASE("PacketNumberSkipper leaves unpredictable gaps and recognises ACKs of them",
          "[rudp][hostile-cpu][optimistic-ack]") {
  PacketNumberSkipper a(1), b(2);
  std::vector<PacketNumber> numbersA, numbersB;
  for (int i = 0; i < 5000; ++i) {
    numbersA.push_back(a.Current());
    a.Advance();
    numbersB.push_back(b.Current());
    b.Advance();
  }
  CHECK(numbersA != numbersB);  // the seed decides where the gaps fall
  // Mean gaps 32, 64, ... 1024: about 10 skips in 5000 packets, the first within 64.
  CHECK(a.SkippedCount() >= 5);
  CHECK(a.SkippedCount() <= 30);
  CHECK(numbersA.back() == numbersA.size() - 1 + a.SkippedCount());
  PacketNumber firstGap = 0;
  for (std::size_t i = 1; i < numbersA.size() && firstGap == 0; ++i) {
    if (numbersA[i] != numbersA[i - 1] + 1) firstGap = numbersA[i - 1] + 1;
  }
  CHECK(firstGap >= 1);
  CHECK(firstGap <= 2 * PacketNumberSkipper::kFirstMeanGap);
  // Numbers actually sent are never "covered"; ranges over a remembered gap are.
  for (PacketNumber pn : numbersA) CHECK_FALSE(a.Covers(pn, pn));
  CHECK(a.Covers(0, a.Current() - 1));
  CHECK(a.Covers(firstGap, firstGap) == (a.SkippedCount() <= PacketNumberSkipper::kRemembered));
}

TEMPLATE_TEST_CASE(
    "an ACK of a skipped packet number ends the connection with ProtocolError at once",
    "[rudp][sim][hostile][hostile-cpu][optimistic-ack]", Plaintext, Encrypted) {
  SimulatedNetwork network(1407);
  rudp::EndpointOptions serverOptions, clientOptions;
  TestType::Configure(serverOptions, clientOptions);
  Hijacked h(network, serverOptions, clientOptions);
  REQUIRE(h.serverSide);
  CHECK(h.serverSide->GetStatistics().encrypted == TestType::kEncrypted);
  REQUIRE(h.Transfer(200, /*toServer*/ false));  // a few hundred server packets, all received
  h.Hijack();
  // The server keeps sending; the attacker acknowledges everything up to the largest sent, as
  // one range, as if it had received it all.
  std::vector<std::uint8_t> big(256u << 10, 0x5A);
  h.serverSide->AsyncSend(boost::asio::buffer(big), [](boost::system::error_code) {});
  network.RunFor(50 * kMillisecond);
  const PacketNumber first = *h.serverSent.begin();
  const PacketNumber largest = *h.serverSent.rbegin();
  // Numbers the server never used lie in [first, largest] (the defence is on).
  REQUIRE(h.serverSent.size() < largest - first + 1);
  bool ended = false;
  boost::system::error_code reason;
  h.serverSide->AsyncWaitClosed([&](boost::system::error_code ec) {
    ended = true;
    reason = ec;
  });
  const auto cwnd = h.serverSide->GetStatistics().congestionWindow;
  h.Send(h.AckPacket({AckRange{first, largest}}));
  CHECK(ended);  // the first such ACK, not the hundredth
  CHECK(reason == Error::ProtocolError);
  CHECK(h.server->Statistics().connectionsOpen == 0);
  CHECK(h.serverSide->GetStatistics().congestionWindow == cwnd);  // it grew nothing
}

// Item 5 (RFC 9000 21.6). The peer acknowledges the server's PINGs and ACK-only packets, and
// pings it, but never acknowledges a byte of data: the connection ends with TimedOut one idle
// timeout after the data stopped moving, however lively the peer looks.
TEMPLATE_TEST_CASE(
    "a peer that never acknowledges data is timed out one idle timeout after it stalls",
    "[rudp][sim][hostile][hostile-cpu][slowloris]", Plaintext, Encrypted) {
  SimulatedNetwork network(1405);
  rudp::EndpointOptions serverOptions, clientOptions;
  serverOptions.idleTimeout = 3'000;
  serverOptions.keepaliveInterval = 500;
  TestType::Configure(serverOptions, clientOptions);
  Hijacked h(network, serverOptions, clientOptions);
  REQUIRE(h.serverSide);
  CHECK(h.serverSide->GetStatistics().encrypted == TestType::kEncrypted);
  REQUIRE(h.Transfer(20, /*toServer*/ false));
  h.Hijack();
  std::vector<std::uint8_t> big(512u << 10, 0x5A);
  h.serverSide->AsyncSend(boost::asio::buffer(big), [](boost::system::error_code) {});
  const Microseconds stalled = network.Now();
  const PacketNumber from = *h.serverSent.rbegin() + 1;

  bool ended = false;
  boost::system::error_code reason;
  h.serverSide->AsyncWaitClosed([&](boost::system::error_code ec) {
    ended = true;
    reason = ec;
  });
  std::uint64_t attackerBytes = 0;
  const auto serverBytesBefore = h.serverBytes;
  // 30 s: ten idle timeouts of a peer that looks alive.
  for (int round = 0; round < 300 && !ended; ++round) {
    network.RunFor(100 * kMillisecond, [&] { return ended; });
    if (ended || h.serverSent.empty() || *h.serverSent.rbegin() < from) continue;
    const auto ranges = h.SentRanges(from, *h.serverSent.rbegin(), /*withStream*/ false);
    const auto packet = h.Packet([&](PacketWriter& w) {
      if (!ranges.empty()) REQUIRE(w.AppendAck(ranges.data(), ranges.size(), 0));
      REQUIRE(w.AppendPing());
    });
    attackerBytes += packet.size();
    h.Send(packet);
  }
  const Microseconds lasted = network.Now() - stalled;
  CAPTURE(lasted, attackerBytes, h.serverBytes - serverBytesBefore);
  REQUIRE(ended);
  CHECK(reason == Error::TimedOut);
  // One idle timeout (3 s) after the data stopped moving, plus a timer granularity and the last
  // round of the loop.
  CHECK(lasted <= 3 * kSecond + 200 * kMillisecond);
  CHECK(lasted >= 3 * kSecond);
}

TEST_CASE("a quiet connection whose peer answers keepalives stays open past the idle timeout",
          "[rudp][sim][hostile-cpu][slowloris]") {
  SimulatedNetwork network(1406);
  rudp::EndpointOptions options;
  options.idleTimeout = 3'000;
  options.keepaliveInterval = 500;
  Hijacked h(network, options, options);
  REQUIRE(h.serverSide);
  REQUIRE(h.Transfer(20, /*toServer*/ false));
  boost::system::error_code reason;
  CHECK_FALSE(WaitClosed(network, *h.serverSide, 20 * kSecond, reason));  // nothing waits
  REQUIRE(h.Transfer(20, /*toServer*/ false));
}

// Item 6. A replayed PING used to draw an immediate ACK every time, carrying every range the
// server remembers (so far larger than the PING). Now: at most one such ACK per RTT, and their
// bytes at most 3x the duplicates' bytes (plus the one ACK that crosses the line).
TEMPLATE_TEST_CASE("replayed packets draw at most one ACK per RTT and 3x their bytes",
                   "[rudp][sim][hostile][hostile-cpu][reflection]", Plaintext, Encrypted) {
  SimulatedNetwork network(1406);
  rudp::EndpointOptions serverOptions, clientOptions;
  TestType::Configure(serverOptions, clientOptions);
  Hijacked h(network, serverOptions, clientOptions);
  REQUIRE(h.serverSide);
  CHECK(h.serverSide->GetStatistics().encrypted == TestType::kEncrypted);
  REQUIRE(h.Transfer(5, /*toServer*/ false));  // the server gets its RTT samples
  h.Hijack();
  // Packets with gaps between them: the server's ACKs now carry kMaxAckRanges ranges.
  for (std::size_t i = 0; i < kMaxAckRanges; ++i) {
    ++h.nextPacketNumber;
    h.Send(h.Packet([](PacketWriter& w) { REQUIRE(w.AppendPing()); }));
  }
  const auto ping = h.Packet([](PacketWriter& w) { REQUIRE(w.AppendPing()); });
  h.Send(ping);
  network.RunFor(100 * kMillisecond);
  // Acknowledge what the server sent meanwhile (ACK + PING answers), so it has nothing in flight
  // to probe for: what it sends from now on answers the replays.
  h.Send(h.AckPacket(h.SentRanges(0, *h.serverSent.rbegin())));
  network.RunFor(kSecond);
  const Microseconds rtt = h.serverSide->GetStatistics().smoothedRttMicroseconds;
  REQUIRE(rtt > 0);

  SECTION("a fast replay: one ACK per RTT") {
    const auto datagrams = h.serverDatagrams;
    const Microseconds start = network.Now();
    for (int i = 0; i < 1000; ++i) {  // one per millisecond
      h.Send(ping);
      network.RunFor(kMillisecond);
    }
    const auto elapsed = network.Now() - start;
    CAPTURE(rtt, elapsed, h.serverDatagrams - datagrams);
    CHECK(h.serverDatagrams - datagrams <= elapsed / rtt + 2);
  }
  SECTION("a slow replay: no more than 3x the bytes replayed") {
    const auto bytes = h.serverBytes;
    std::uint64_t replayed = 0;
    for (int i = 0; i < 50; ++i) {  // one per RTT and more
      h.Send(ping);
      replayed += ping.size();
      network.RunFor(2 * rtt);
    }
    CAPTURE(replayed, h.serverBytes - bytes);
    CHECK(h.serverBytes - bytes <= 3 * replayed + 400);  // 400: one ACK of 32 ranges, at most
  }
}
