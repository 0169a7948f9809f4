// Key phases (issue 20): both ends of a connection update their keys together, packets
// reordered across an update still open, and nothing a forger sends moves the keys.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "ReliableUDP/Detail/ConnectionKeys.h"

using namespace timerwheel::rudp::detail;

namespace {

TrafficSecrets Secrets() {
  TrafficSecrets secrets;
  for (std::size_t i = 0; i < secrets.client.size(); ++i) {
    secrets.client[i] = static_cast<std::uint8_t>(i);
    secrets.server[i] = static_cast<std::uint8_t>(0xA0 + i);
  }
  return secrets;
}

struct Sealed {
  PacketNumber number = 0;
  bool phaseBit = false;
  std::vector<std::uint8_t> bytes;
};

constexpr std::size_t kHeaderSize = 9;

Sealed Send(ConnectionKeys& keys, PacketNumber number, const std::string& text) {
  Sealed packet;
  packet.number = number;
  packet.phaseBit = keys.PrepareSend();
  packet.bytes.assign(kHeaderSize, static_cast<std::uint8_t>(packet.phaseBit ? 0x81 : 0x80));
  packet.bytes.insert(packet.bytes.end(), text.begin(), text.end());
  packet.bytes.resize(packet.bytes.size() + kAeadTagSize);
  keys.Seal(number, packet.bytes.data(), kHeaderSize, text.size());
  return packet;
}

// Opens a copy (the original stays sealed, for replays); the text, or "" if refused.
std::string Receive(ConnectionKeys& keys, const Sealed& packet) {
  std::vector<std::uint8_t> copy = packet.bytes;
  std::size_t size = 0;
  if (!keys.Open(packet.number, packet.phaseBit, copy.data(), kHeaderSize, copy.size(), size)) {
    return "";
  }
  return std::string(copy.begin() + kHeaderSize, copy.begin() + kHeaderSize + size);
}

}  // namespace

TEST_CASE("each side seals with its own direction's key and opens the other's", "[rudp][crypto]") {
  for (const AeadAlgorithm algorithm :
       {AeadAlgorithm::ChaCha20Poly1305, AeadAlgorithm::Aes256Gcm}) {
    if (algorithm == AeadAlgorithm::Aes256Gcm && !Aes256GcmAvailable()) continue;
    ConnectionKeys client(algorithm, Secrets(), true);
    ConnectionKeys server(algorithm, Secrets(), false);
    CHECK(Receive(server, Send(client, 0, "to the server")) == "to the server");
    CHECK(Receive(client, Send(server, 0, "to the client")) == "to the client");
    // A side cannot open its own packets: the directions' keys differ (no reflection).
    CHECK(Receive(client, Send(client, 1, "reflected")).empty());
  }
}

TEST_CASE("keys update after packetsPerKey packets, both sides together, across reordering",
          "[rudp][crypto]") {
  constexpr std::uint64_t kPerKey = 4;
  ConnectionKeys client(AeadAlgorithm::ChaCha20Poly1305, Secrets(), true, kPerKey);
  ConnectionKeys server(AeadAlgorithm::ChaCha20Poly1305, Secrets(), false, kPerKey);

  // Phase 0: the client may not update before it has heard from the server in phase 0.
  std::vector<Sealed> early;
  for (PacketNumber n = 0; n < 6; ++n) early.push_back(Send(client, n, "p" + std::to_string(n)));
  CHECK(client.Phase() == 0);
  CHECK_FALSE(early.back().phaseBit);
  CHECK(Receive(client, Send(server, 0, "hello")) == "hello");
  // Now it may: packet 6 goes out in phase 1, while 4 and 5 (phase 0) are still on the way.
  const Sealed updated = Send(client, 6, "p6");
  CHECK(updated.phaseBit);
  CHECK(client.Phase() == 1);
  for (PacketNumber n = 0; n < 4; ++n) CHECK(Receive(server, early[n]) == "p" + std::to_string(n));

  // The server sees phase 1 first, then the reordered phase-0 packets.
  CHECK(Receive(server, updated) == "p6");
  CHECK(server.Phase() == 1);
  CHECK(server.HasPreviousKey());
  CHECK(Receive(server, early[5]) == "p5");
  CHECK(Receive(server, early[4]) == "p4");
  // The server answers in phase 1, which the client opens with its current key.
  const Sealed answer = Send(server, 1, "ack");
  CHECK(answer.phaseBit);
  CHECK(Receive(client, answer) == "ack");
  CHECK(client.Phase() == 1);

  // Once the previous key is discarded, a late phase-0 packet no longer opens; nothing moves.
  server.DiscardPreviousKey();
  CHECK(Receive(server, early[4]).empty());
  CHECK(server.Phase() == 1);
  CHECK(Receive(server, Send(client, 7, "p7")) == "p7");
}

TEST_CASE("a forged or altered packet with the other phase bit does not move the keys",
          "[rudp][crypto]") {
  ConnectionKeys client(AeadAlgorithm::ChaCha20Poly1305, Secrets(), true, 4);
  ConnectionKeys server(AeadAlgorithm::ChaCha20Poly1305, Secrets(), false, 4);
  Sealed packet = Send(client, 0, "genuine");
  Sealed forged = packet;
  forged.phaseBit = !forged.phaseBit;  // the bit as an attacker flips it
  CHECK(Receive(server, forged).empty());
  forged = packet;
  forged.phaseBit = true;
  forged.bytes[kHeaderSize] ^= 1;
  CHECK(Receive(server, forged).empty());
  CHECK(server.Phase() == 0);
  CHECK_FALSE(server.HasPreviousKey());
  CHECK(Receive(server, packet) == "genuine");
}

TEST_CASE("a peer cannot force a second update before we sent a packet in the phase",
          "[rudp][crypto][hostile]") {
  // The rogue client follows the rules as far as it can be made to: `mirror` keeps the same keys
  // as the server under test and tells the rogue that the server is in each new phase, which the
  // real server never said.
  ConnectionKeys rogue(AeadAlgorithm::ChaCha20Poly1305, Secrets(), true, 1);
  ConnectionKeys server(AeadAlgorithm::ChaCha20Poly1305, Secrets(), false, 1);
  ConnectionKeys mirror(AeadAlgorithm::ChaCha20Poly1305, Secrets(), false, 1);
  CHECK(Receive(server, Send(rogue, 0, "p0")) == "p0");
  CHECK(Receive(rogue, Send(server, 0, "s0")) == "s0");  // the server did send in phase 0
  const Sealed first = Send(rogue, 1, "p1");
  CHECK(first.phaseBit);
  CHECK(Receive(server, first) == "p1");  // a genuine update: followed
  Send(mirror, 0, "s0");                  // in step with the server
  CHECK(Receive(mirror, first) == "p1");
  CHECK(server.Phase() == 1);

  // The rogue hears of phase 1 from the mirror only, and updates again at once.
  CHECK(Receive(rogue, Send(mirror, 1, "m")) == "m");
  const Sealed second = Send(rogue, 2, "p2");
  CHECK(rogue.Phase() == 2);
  CHECK(Receive(server, second).empty());
  CHECK(server.Phase() == 1);
  // Once the server has sent in phase 1, the same update is a genuine one.
  Send(server, 1, "s1");
  CHECK(Receive(server, second) == "p2");
  CHECK(server.Phase() == 2);
}

TEST_CASE("long-running connections step through many phases", "[rudp][crypto]") {
  ConnectionKeys client(AeadAlgorithm::ChaCha20Poly1305, Secrets(), true, 2);
  ConnectionKeys server(AeadAlgorithm::ChaCha20Poly1305, Secrets(), false, 2);
  PacketNumber clientNumber = 0, serverNumber = 0;
  for (int round = 0; round < 50; ++round) {
    const std::string text = "round " + std::to_string(round);
    REQUIRE(Receive(server, Send(client, clientNumber++, text)) == text);
    REQUIRE(Receive(client, Send(server, serverNumber++, text)) == text);
    server.DiscardPreviousKey();
    client.DiscardPreviousKey();
  }
  CHECK(client.Phase() >= 10);
  CHECK(client.Phase() - server.Phase() <= 1);
}

TEST_CASE(
    "packets that fail to open count against the AEAD's integrity limit, across every key, and "
    "at the limit nothing opens any more",
    "[rudp][crypto]") {
  // RFC 9001 6.6's limits, the defaults (and a lower one only as asked: never a higher one).
  CHECK(ConnectionKeys::IntegrityLimit(AeadAlgorithm::ChaCha20Poly1305) == std::uint64_t{1} << 36);
  CHECK(ConnectionKeys::IntegrityLimit(AeadAlgorithm::Aes256Gcm) == std::uint64_t{1} << 52);
  CHECK_FALSE(
      ConnectionKeys(AeadAlgorithm::ChaCha20Poly1305, Secrets(), false, 4, std::uint64_t{1} << 40)
          .IntegrityLimitReached());

  constexpr std::uint64_t kLimit = 5;
  ConnectionKeys client(AeadAlgorithm::ChaCha20Poly1305, Secrets(), true, 2, kLimit);
  ConnectionKeys server(AeadAlgorithm::ChaCha20Poly1305, Secrets(), false, 2, kLimit);
  const auto forge = [](Sealed packet) {
    packet.bytes.back() ^= 0x01;  // the tag
    return packet;
  };
  // Failures under phase 0's key, then, after a key update, under the previous key and the new.
  CHECK(Receive(server, forge(Send(client, 0, "a"))).empty());
  CHECK(Receive(server, forge(Send(client, 1, "b"))).empty());
  CHECK(server.FailedOpens() == 2);
  const Sealed old = Send(client, 2, "c");  // phase 0, held back (reordered past the update)
  CHECK(Receive(client, Send(server, 0, "hello")) == "hello");
  const Sealed next = Send(client, 3, "d");  // phase 1: the client updated
  REQUIRE(next.phaseBit);
  CHECK(Receive(server, next) == "d");
  REQUIRE(server.HasPreviousKey());
  CHECK(Receive(server, forge(old)).empty());  // the previous key's
  CHECK(Receive(server, forge(Send(client, 4, "e"))).empty());
  CHECK(server.FailedOpens() == 4);
  CHECK_FALSE(server.IntegrityLimitReached());
  CHECK(Receive(server, old) == "c");  // below the limit, what is genuine still opens

  // The fifth failure reaches it: from then on not even a genuine packet opens.
  CHECK(Receive(server, forge(Send(client, 5, "f"))).empty());
  CHECK(server.IntegrityLimitReached());
  CHECK(Receive(server, Send(client, 6, "g")).empty());
  CHECK(server.FailedOpens() == kLimit);  // refused without trying the AEAD
}
