// Packet protection (issue 20): libsodium's AEADs as PacketProtection uses them, against the
// standards' known answers, and what a receiver sees of a packet altered in any byte.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "ReliableUDP/Detail/PacketProtection.h"
#include "ReliableUDP/Support/Hex.h"

using namespace timerwheel::rudp::detail;
using timerwheel::test::ArrayFromHex;
using timerwheel::test::FromHex;

namespace {

// RFC 8439, section 2.8.2: with packet number 0 the nonce is the IV itself.
PacketKey Rfc8439Key() {
  PacketKey key;
  for (std::size_t i = 0; i < key.key.size(); ++i) key.key[i] = static_cast<std::uint8_t>(0x80 + i);
  key.iv = ArrayFromHex<kAeadIvSize>("070000004041424344454647");
  return key;
}

std::vector<std::uint8_t> Packet(const std::vector<std::uint8_t>& header, const std::string& text) {
  std::vector<std::uint8_t> packet(header);
  packet.insert(packet.end(), text.begin(), text.end());
  packet.resize(packet.size() + kAeadTagSize);
  return packet;
}

std::vector<AeadAlgorithm> AlgorithmsHere() {
  std::vector<AeadAlgorithm> algorithms{AeadAlgorithm::ChaCha20Poly1305};
  if (Aes256GcmAvailable()) algorithms.push_back(AeadAlgorithm::Aes256Gcm);
  return algorithms;
}

}  // namespace

TEST_CASE("ChaCha20-Poly1305 seals in place as RFC 8439's AEAD test vector says",
          "[rudp][crypto]") {
  const auto header = FromHex("50515253c0c1c2c3c4c5c6c7");  // the vector's associated data
  const std::string text =
      "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
      "future, sunscreen would be it.";
  auto packet = Packet(header, text);
  const PacketProtection protection(AeadAlgorithm::ChaCha20Poly1305, Rfc8439Key());
  const std::size_t sealed = protection.Seal(0, packet.data(), header.size(), text.size());
  REQUIRE(sealed == packet.size());
  const std::vector<std::uint8_t> ciphertextStart(packet.begin() + 12, packet.begin() + 28);
  CHECK(ciphertextStart == FromHex("d31a8d34648e60db7b86afbc53ef7ec2"));
  const std::vector<std::uint8_t> tag(packet.end() - 16, packet.end());
  CHECK(tag == FromHex("1ae10b594f09e26a7e902ecbd0600691"));
  // The header is authenticated, never encrypted.
  CHECK(std::vector<std::uint8_t>(packet.begin(), packet.begin() + 12) == header);

  std::size_t payloadSize = 0;
  REQUIRE(protection.Open(0, packet.data(), header.size(), sealed, payloadSize));
  CHECK(std::string(packet.begin() + 12, packet.begin() + 12 + payloadSize) == text);
}

TEST_CASE("AES-256-GCM seals as the GCM specification's test cases 13 and 14 say",
          "[rudp][crypto]") {
  if (!Aes256GcmAvailable()) {
    WARN("no AES-NI and PCLMUL on this machine: libsodium has no AES-256-GCM here");
    return;
  }
  const PacketProtection protection(AeadAlgorithm::Aes256Gcm, PacketKey{});  // zero key and IV
  std::vector<std::uint8_t> empty(kAeadTagSize);
  protection.Seal(0, empty.data(), 0, 0);
  CHECK(empty == FromHex("530f8afbc74536b9a963b4f1c4cb738b"));
  std::vector<std::uint8_t> block(16 + kAeadTagSize);
  protection.Seal(0, block.data(), 0, 16);
  CHECK(block == FromHex("cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919"));
}

TEST_CASE("a protected packet altered in any byte, or opened under another number, is refused",
          "[rudp][crypto]") {
  for (const AeadAlgorithm algorithm : AlgorithmsHere()) {
    CAPTURE(static_cast<int>(algorithm));
    const PacketProtection protection(algorithm, Rfc8439Key());
    const std::vector<std::uint8_t> header = FromHex("1401020304050607084105");
    auto original = Packet(header, std::string(40, 'x'));
    const std::size_t sealed = protection.Seal(261, original.data(), header.size(), 40);
    std::size_t payloadSize = 0;

    for (std::size_t position = 0; position < original.size(); ++position) {
      for (const std::uint8_t flip : {0x01, 0x80}) {
        auto altered = original;
        altered[position] ^= flip;
        CAPTURE(position, flip);
        CHECK_FALSE(protection.Open(261, altered.data(), header.size(), sealed, payloadSize));
      }
    }
    auto copy = original;
    CHECK_FALSE(protection.Open(262, copy.data(), header.size(), sealed, payloadSize));
    copy = original;
    CHECK_FALSE(protection.Open(261, copy.data(), header.size(), sealed - 1, payloadSize));
    copy = original;
    CHECK_FALSE(protection.Open(261, copy.data(), header.size(), header.size() + 15, payloadSize));

    PacketKey otherKey = Rfc8439Key();
    otherKey.key[31] ^= 1;
    const PacketProtection other(algorithm, otherKey);
    copy = original;
    CHECK_FALSE(other.Open(261, copy.data(), header.size(), sealed, payloadSize));

    copy = original;
    REQUIRE(protection.Open(261, copy.data(), header.size(), sealed, payloadSize));
    CHECK(payloadSize == 40);
    CHECK(std::string(copy.begin() + 11, copy.begin() + 51) == std::string(40, 'x'));
  }
}

TEST_CASE("the nonce is the IV XOR the packet number: each number seals differently",
          "[rudp][crypto]") {
  for (const AeadAlgorithm algorithm : AlgorithmsHere()) {
    const PacketProtection protection(algorithm, Rfc8439Key());
    auto first = Packet({0x14}, "same plaintext");
    auto second = first;
    protection.Seal(1, first.data(), 1, 14);
    protection.Seal(1ull << 56, second.data(), 1, 14);
    CHECK(first != second);
    std::size_t payloadSize = 0;
    CHECK(protection.Open(1ull << 56, second.data(), 1, second.size(), payloadSize));
  }
}
