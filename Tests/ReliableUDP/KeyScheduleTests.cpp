// The keyed handshake's primitives as the key schedule uses them (HKDF-SHA256, X25519) against
// their standards' known answers, and the schedule itself: both sides derive the same keys only
// when the client pinned the right server key. And every key struct wipes its secrets as it goes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/ConnectionCore.h"
#include "ReliableUDP/Detail/Hkdf.h"
#include "ReliableUDP/Detail/KeySchedule.h"
#include "ReliableUDP/Detail/Wipe.h"
#include "ReliableUDP/Support/Hex.h"

using namespace timerwheel::rudp::detail;
using timerwheel::test::ArrayFromHex;
using timerwheel::test::FromHex;

TEST_CASE("HKDF-SHA256 matches RFC 5869's test case 1", "[rudp][crypto]") {
  const auto ikm = FromHex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b");
  const auto salt = FromHex("000102030405060708090a0b0c");
  const auto info = FromHex("f0f1f2f3f4f5f6f7f8f9");
  const HkdfKey prk = HkdfExtract(salt.data(), salt.size(), ikm.data(), ikm.size());
  CHECK(prk ==
        ArrayFromHex<32>("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5"));
  std::vector<std::uint8_t> okm(42);
  HkdfExpand(prk, info.data(), info.size(), okm.data(), okm.size());
  CHECK(okm == FromHex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                       "34007208d5b887185865"));
}

TEST_CASE("X25519 matches RFC 7748's Diffie-Hellman example and refuses small-order keys",
          "[rudp][crypto]") {
  const auto alice =
      ArrayFromHex<32>("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const auto bob =
      ArrayFromHex<32>("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  const X25519Key alicePublic = X25519PublicKey(alice);
  const X25519Key bobPublic = X25519PublicKey(bob);
  CHECK(alicePublic ==
        ArrayFromHex<32>("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"));
  CHECK(bobPublic ==
        ArrayFromHex<32>("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"));
  X25519Key fromAlice{}, fromBob{};
  REQUIRE(X25519(alice, bobPublic, fromAlice));
  REQUIRE(X25519(bob, alicePublic, fromBob));
  const auto shared =
      ArrayFromHex<32>("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  CHECK(fromAlice == shared);
  CHECK(fromBob == shared);

  X25519Key out{};
  CHECK_FALSE(X25519(alice, X25519Key{}, out));  // 0: the identity, of order 1
  X25519Key one{};
  one[0] = 1;  // the point of order 4
  CHECK_FALSE(X25519(alice, one, out));
}

namespace {

struct Transcript {
  TrafficSecrets secrets;
  PacketKey helloKey;
  PacketKey welcomeKey;
};

// The NK exchange, side by side: what the client derives with `pinned` as the server's key, and
// what the server derives with its own key pair.
Transcript RunClient(const X25519Key& pinned, const X25519KeyPair& clientEphemeral,
                     const X25519Key& serverEphemeralPublic) {
  KeySchedule schedule(pinned);
  schedule.MixHash(clientEphemeral.publicKey.data(), clientEphemeral.publicKey.size());
  X25519Key es{}, ee{};
  REQUIRE(X25519(clientEphemeral.secretKey, pinned, es));
  schedule.MixKey(es);
  Transcript result;
  result.helloKey = schedule.MessageKey("hello");
  schedule.MixHash(serverEphemeralPublic.data(), serverEphemeralPublic.size());
  REQUIRE(X25519(clientEphemeral.secretKey, serverEphemeralPublic, ee));
  schedule.MixKey(ee);
  result.welcomeKey = schedule.MessageKey("welcome");
  result.secrets = schedule.Split();
  return result;
}

Transcript RunServer(const X25519KeyPair& serverStatic, const X25519Key& clientEphemeralPublic,
                     const X25519KeyPair& serverEphemeral) {
  KeySchedule schedule(serverStatic.publicKey);
  schedule.MixHash(clientEphemeralPublic.data(), clientEphemeralPublic.size());
  X25519Key es{}, ee{};
  REQUIRE(X25519(serverStatic.secretKey, clientEphemeralPublic, es));
  schedule.MixKey(es);
  Transcript result;
  result.helloKey = schedule.MessageKey("hello");
  schedule.MixHash(serverEphemeral.publicKey.data(), serverEphemeral.publicKey.size());
  REQUIRE(X25519(serverEphemeral.secretKey, clientEphemeralPublic, ee));
  schedule.MixKey(ee);
  result.welcomeKey = schedule.MessageKey("welcome");
  result.secrets = schedule.Split();
  return result;
}

bool SameKey(const PacketKey& a, const PacketKey& b) { return a.key == b.key && a.iv == b.iv; }

}  // namespace

TEST_CASE("client and server derive the same keys only with the right server key",
          "[rudp][crypto]") {
  const X25519KeyPair serverStatic = GenerateX25519KeyPair();
  const X25519KeyPair clientEphemeral = GenerateX25519KeyPair();
  const X25519KeyPair serverEphemeral = GenerateX25519KeyPair();
  const Transcript server = RunServer(serverStatic, clientEphemeral.publicKey, serverEphemeral);

  const Transcript client =
      RunClient(serverStatic.publicKey, clientEphemeral, serverEphemeral.publicKey);
  CHECK(SameKey(client.helloKey, server.helloKey));
  CHECK(SameKey(client.welcomeKey, server.welcomeKey));
  CHECK(client.secrets.client == server.secrets.client);
  CHECK(client.secrets.server == server.secrets.server);
  CHECK(client.secrets.client != client.secrets.server);
  CHECK_FALSE(SameKey(client.helloKey, client.welcomeKey));

  // A client that pinned another key shares nothing with this server.
  const X25519KeyPair impostor = GenerateX25519KeyPair();
  const Transcript wrong =
      RunClient(impostor.publicKey, clientEphemeral, serverEphemeral.publicKey);
  CHECK_FALSE(SameKey(wrong.helloKey, server.helloKey));
  CHECK_FALSE(SameKey(wrong.welcomeKey, server.welcomeKey));
  CHECK(wrong.secrets.client != server.secrets.client);

  // Another server ephemeral (a replayed or forged Welcome) changes the traffic keys.
  const Transcript otherEphemeral =
      RunClient(serverStatic.publicKey, clientEphemeral, GenerateX25519KeyPair().publicKey);
  CHECK(SameKey(otherEphemeral.helloKey, server.helloKey));
  CHECK_FALSE(SameKey(otherEphemeral.welcomeKey, server.welcomeKey));
  CHECK(otherEphemeral.secrets.server != server.secrets.server);
}

TEST_CASE("traffic secrets give packet keys and a chain of key updates", "[rudp][crypto]") {
  HkdfKey secret{};
  secret[0] = 7;
  const HkdfKey next = NextTrafficSecret(secret);
  CHECK(next != secret);
  CHECK(NextTrafficSecret(next) != next);
  CHECK(NextTrafficSecret(secret) == next);  // deterministic: both sides step together
  const PacketKey key = PacketKeyFromSecret(secret);
  const PacketKey nextKey = PacketKeyFromSecret(next);
  CHECK(key.key != nextKey.key);
  CHECK(key.iv != nextKey.iv);
}

namespace {

// Makes a `Key` in a buffer that outlives it, lets `fill` put secrets in it and say which bytes
// they are (offsets from the object's start, as the object lays itself out), destroys it, and
// returns whether those bytes of the buffer are all zero: what the destructor left behind.
template <class Key, class Fill>
bool DestructorWipes(Fill fill) {
  alignas(Key) unsigned char storage[sizeof(Key)];
  Key* const key = new (storage) Key();
  const std::vector<std::pair<std::size_t, std::size_t>> secrets = fill(*key);
  for (const auto& [offset, size] : secrets) {
    for (std::size_t i = 0; i < size; ++i) {
      if (storage[offset + i] == 0) return false;  // the fill did not reach it
    }
  }
  key->~Key();
  // Read through volatile: the bytes' values once the object has gone are whatever its
  // destructor left (unsigned char may read them), but GCC takes the end of its lifetime for a
  // clobber, and would call the reads uninitialized (-Wmaybe-uninitialized under -O1) or fold
  // them away.
  const volatile unsigned char* const left = storage;
  for (const auto& [offset, size] : secrets) {
    for (std::size_t i = 0; i < size; ++i) {
      if (left[offset + i] != 0) return false;
    }
  }
  return true;
}

template <class Object, class Member>
std::pair<std::size_t, std::size_t> Span(const Object& object, const Member& member) {
  return {static_cast<std::size_t>(reinterpret_cast<const unsigned char*>(&member) -
                                   reinterpret_cast<const unsigned char*>(&object)),
          sizeof member};
}

bool AllZero(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  return std::all_of(bytes, bytes + size, [](unsigned char byte) { return byte == 0; });
}

}  // namespace

TEST_CASE("key structs wipe their secrets when they go, and on Wipe()", "[rudp][crypto]") {
  // Wipe(), called explicitly.
  X25519KeyPair pair = GenerateX25519KeyPair();
  REQUIRE_FALSE(AllZero(pair.secretKey.data(), pair.secretKey.size()));
  pair.Wipe();
  CHECK(AllZero(&pair, sizeof pair));
  TrafficSecrets secrets;
  secrets.client.fill(0x11);
  secrets.server.fill(0x22);
  secrets.Wipe();
  CHECK(AllZero(&secrets, sizeof secrets));
  PacketKey packetKey;
  packetKey.key.fill(0x33);
  packetKey.iv.fill(0x44);
  packetKey.Wipe();
  CHECK(AllZero(&packetKey, sizeof packetKey));
  X25519Key shared{};
  shared.fill(0x55);
  { const WipeAtScopeExit wipe(shared); }
  CHECK(AllZero(shared.data(), shared.size()));

  // The destructors, on storage that outlives the object.
  CHECK(DestructorWipes<X25519KeyPair>([](X25519KeyPair& key) {
    key = GenerateX25519KeyPair();
    for (auto& byte : key.secretKey) byte |= 0x80;  // no zero byte: the fill is seen
    return std::vector<std::pair<std::size_t, std::size_t>>{Span(key, key.secretKey)};
  }));
  CHECK(DestructorWipes<TrafficSecrets>([](TrafficSecrets& key) {
    key.client.fill(0x66);
    key.server.fill(0x77);
    return std::vector<std::pair<std::size_t, std::size_t>>{Span(key, key)};
  }));
  CHECK(DestructorWipes<PacketKey>([](PacketKey& key) {
    key.key.fill(0x88);
    key.iv.fill(0x99);
    return std::vector<std::pair<std::size_t, std::size_t>>{Span(key, key)};
  }));
  // What the server keeps to repeat its Welcome, and what the endpoint fills for it.
  CHECK(DestructorWipes<ConnectionCore::SecureStart>([](ConnectionCore::SecureStart& start) {
    start.welcomeKey.key.fill(0xAA);
    start.welcomeKey.iv.fill(0xBB);
    start.secrets.client.fill(0xCC);
    start.secrets.server.fill(0xDD);
    return std::vector<std::pair<std::size_t, std::size_t>>{Span(start, start.welcomeKey),
                                                            Span(start, start.secrets)};
  }));
}
