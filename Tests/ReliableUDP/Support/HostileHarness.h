// A server and a client with N connections on the simulated network, and what a wiretap learned
// about them: the tests of hostile peers inject crafted packets into those connections (sealed
// with the client's keys when the connections are encrypted).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "ReliableUDP/Detail/ConnectionCore.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/FrameWriting.h"
#include "ReliableUDP/Support/PeerPackets.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"

namespace timerwheel::test {

struct HostileHarness {
  static constexpr Microseconds kSecond = 1'000'000;

  HostileHarness(SimulatedNetwork& network_, const rudp::EndpointOptions& serverOptions,
                 std::size_t connections, const rudp::EndpointOptions& clientOptions = {})
      : network(network_) {
    auto options = serverOptions;
    options.acceptIncoming = true;
    server = &network.AddHost(9000, options);
    auto clientSideOptions = clientOptions;
    clientSideOptions.maxConnections = std::max<std::size_t>(connections + 10, 200);
    client = &network.AddHost(9001, clientSideOptions);
    network.tap = [this](const Udp::endpoint& from, const Udp::endpoint&,
                         const std::vector<std::uint8_t>& datagram) {
      rudp::detail::DecodedPacket packet;
      if (rudp::detail::DecodePacket(datagram.data(), datagram.size(), packet) !=
          rudp::detail::DecodeStatus::Ok) {
        return;
      }
      if (from == client->Address()) {
        ++clientDatagrams;
        if (packet.header.type != rudp::detail::PacketType::Data &&
            !rudp::detail::IsSecureData(packet.header.type)) {
          return;
        }
        auto& largest = clientLargest[packet.header.destination];
        largest = std::max(largest, packet.header.packetNumber);
      } else if (from == server->Address()) {
        if (packet.header.type == rudp::detail::PacketType::Welcome ||
            packet.header.type == rudp::detail::PacketType::SecureWelcome) {
          // The server's connection ID. Crafted packets number from 100 on (the client sends
          // nothing of its own in these tests before then).
          clientIdOf[packet.header.source] = packet.header.destination;
          auto& largest = clientLargest[packet.header.source];
          largest = std::max<rudp::detail::PacketNumber>(largest, 100);
        }
        ++serverDatagrams;
        serverBytes += datagram.size();
        serverPackets.push_back(datagram);
      }
    };
    for (std::size_t i = 0; i < connections; ++i) {
      server->Accept([this](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
        if (!ec) serverSides.push_back(std::move(c));
      });
      client->Connect(server->Address(),
                      [this](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
                        if (!ec) clientSides.push_back(std::move(c));
                      });
    }
    network.RunFor(10 * kSecond, [this, connections] {
      return clientSides.size() == connections && serverSides.size() == connections &&
             clientLargest.size() == connections;
    });
  }

  // The connections' destructors still send (an abort): the tap must not see our members gone.
  ~HostileHarness() { network.tap = nullptr; }
  HostileHarness(const HostileHarness&) = delete;
  HostileHarness& operator=(const HostileHarness&) = delete;

  // The server-side connection IDs (what the client sends to), in no particular order.
  std::vector<rudp::detail::ConnectionId> ServerIds() const {
    std::vector<rudp::detail::ConnectionId> ids;
    for (const auto& entry : clientLargest) ids.push_back(entry.first);
    return ids;
  }

  // A Data packet to `serverId` from the client's address with the next packet number and the
  // given STREAM frames (offset, length; the bytes are 0x42), delivered to the server now.
  // Returns its packet number.
  rudp::detail::PacketNumber SendStream(
      rudp::detail::ConnectionId serverId,
      const std::vector<std::pair<std::uint64_t, std::size_t>>& frames) {
    const rudp::detail::PacketNumber number = ++clientLargest[serverId];
    rudp::detail::ConnectionCore* const sender =
        client->Core().FindConnection(clientIdOf[serverId]);
    if (sender == nullptr) throw std::logic_error("HostileHarness: no such connection");
    const std::vector<std::uint8_t> bytes(64 * 1024, 0x42);
    const auto datagram =
        WriteDataPacket(sender->Keys(), serverId, number, [&](rudp::detail::PacketWriter& writer) {
          for (const auto& frame : frames) {
            std::size_t written = 0;
            if (!AppendStreamFrame(writer, frame.first, bytes.data(), frame.second, &written) ||
                written != frame.second) {
              throw std::logic_error("HostileHarness: the frames do not fit in one datagram");
            }
          }
        });
    server->Deliver(client->Address(), datagram);
    return number;
  }

  // Whether any ACK the server sent acknowledges `number` (of any connection's client). Plaintext
  // connections only: the ACKs of encrypted ones are sealed.
  bool ServerAcked(rudp::detail::PacketNumber number) const {
    for (const auto& datagram : serverPackets) {
      rudp::detail::DecodedPacket packet;
      if (rudp::detail::DecodePacket(datagram.data(), datagram.size(), packet) !=
              rudp::detail::DecodeStatus::Ok ||
          packet.header.type != rudp::detail::PacketType::Data) {
        continue;
      }
      rudp::detail::FrameReader reader(packet.frames, packet.framesSize);
      rudp::detail::Frame frame;
      while (!reader.AtEnd() && reader.Next(frame) == rudp::detail::DecodeStatus::Ok) {
        if (frame.type != rudp::detail::FrameType::Ack) continue;
        for (std::size_t i = 0; i < frame.ack.rangeCount; ++i) {
          if (frame.ack.ranges[i].smallest <= number && number <= frame.ack.ranges[i].largest) {
            return true;
          }
        }
      }
    }
    return false;
  }

  SimulatedNetwork& network;
  SimulatedHost* server = nullptr;
  SimulatedHost* client = nullptr;
  std::vector<std::shared_ptr<rudp::Connection>> clientSides, serverSides;
  std::map<rudp::detail::ConnectionId, rudp::detail::PacketNumber> clientLargest;
  std::map<rudp::detail::ConnectionId, rudp::detail::ConnectionId> clientIdOf;  // by server ID
  std::vector<std::vector<std::uint8_t>> serverPackets;
  std::uint64_t clientDatagrams = 0, serverDatagrams = 0, serverBytes = 0;
};

}  // namespace timerwheel::test
