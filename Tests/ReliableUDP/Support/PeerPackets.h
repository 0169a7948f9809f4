// The two modes the hostile-peer tests run in (plaintext, and encrypted as issue 20 made it), and
// Data packets written in the name of a connection's peer: sealed under that connection's own
// keys when it is encrypted, so an attack reaches the frame decoder behind the AEAD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "ReliableUDP/Detail/ConnectionKeys.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/EndpointOptions.h"

namespace timerwheel::test {

// TEMPLATE_TEST_CASE parameters. Encrypted: the server has a key pair and the client pins its
// public half. The attacker is then a client that holds its connection's keys (an authenticated
// peer gone rogue): what an off-path attacker sends is dropped before any frame is read
// (EncryptedTransportTests), so the bounds that matter are those against the keyed peer.
struct Plaintext {
  static constexpr bool kEncrypted = false;
  static void Configure(rudp::EndpointOptions&, rudp::EndpointOptions&) {}
};
struct Encrypted {
  static constexpr bool kEncrypted = true;
  static void Configure(rudp::EndpointOptions& server, rudp::EndpointOptions& client) {
    const auto key = rudp::MakeServerKeyPair();
    server.serverSecretKey = key.secretKey;
    client.serverPublicKey = key.publicKey;
  }
};

// Data in clear when `keys` is nullptr, else SecureData sealed under the keys' current send key
// (as the connection that owns them would seal packet `number`). `frames` appends the frames.
inline std::vector<std::uint8_t> WriteDataPacket(
    rudp::detail::ConnectionKeys* keys, rudp::detail::ConnectionId destination,
    rudp::detail::PacketNumber number,
    const std::function<void(rudp::detail::PacketWriter&)>& frames,
    std::size_t capacity = rudp::detail::kMaxDatagramSize) {
  class KeysSealer final : public rudp::detail::IPacketSealer {
   public:
    KeysSealer(rudp::detail::ConnectionKeys& keys, rudp::detail::PacketNumber number)
        : m_keys(keys), m_number(number) {}
    void Seal(std::uint8_t* packet, std::size_t authenticatedSize,
              std::size_t plaintextSize) noexcept override {
      m_keys.Seal(m_number, packet, authenticatedSize, plaintextSize);
    }

   private:
    rudp::detail::ConnectionKeys& m_keys;
    rudp::detail::PacketNumber m_number;
  };
  std::vector<std::uint8_t> datagram(capacity);
  rudp::detail::PacketWriter writer(datagram.data(), datagram.size());
  if (keys == nullptr) {
    writer.BeginData(destination, number);
    frames(writer);
    datagram.resize(writer.Finish());
    return datagram;
  }
  KeysSealer sealer(*keys, number);
  writer.BeginSecureData(destination, number, keys->PrepareSend(), sealer);
  frames(writer);
  datagram.resize(writer.Finish());
  return datagram;
}

}  // namespace timerwheel::test
