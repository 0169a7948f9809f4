// libFuzzer target: ReliableUDP's connection state machine, through the sans-I/O EndpointCore.
//
// Per input: a client and a server SimulatedHost (Tests/ReliableUDP/Support/SimulatedNetwork.h:
// virtual time, seeded links) complete a handshake, then the input is read as operations
// (ConnectionOps.h): application sends, receives, close, abort and dropping the handle on either
// side; advancing virtual time; changing a link's loss, duplication, reordering, corruption, delay
// or state; and injecting datagrams into either endpoint, as if from its peer (or a third
// address): raw bytes, raw bytes with a valid CRC-32C, Data packets to the real connection ID with
// a plausible packet number and frames from the input, and replays (optionally mutated) of real
// datagrams captured by a tap on the network. The tap also learns the connection IDs and packet
// numbers. Encrypted (configuration bit 5), the Data packets it builds are sealed with the
// impersonated sender's own keys, so that fuzzed frames still reach the engine's frame decoder.
//
// Invariants, any violation aborts:
//  - nothing crashes and no exception escapes the endpoint;
//  - every message an application receives is the next message its peer's application sent, byte
//    for byte (no corruption, loss within the sequence, duplication or reordering), and never one
//    that was not sent; every STREAM frame a real endpoint sends carries the bytes its
//    application sent at that offset, and every frame it sends decodes (plaintext only: the tap
//    cannot open sealed packets without moving the recipient's key phase);
//  - every handler runs exactly once (by the end, after both endpoints shut down); sends and
//    receives that were queued complete in the order they were started; a send that failed is
//    never followed by one that succeeds; an oversized send fails with MessageTooLarge; a
//    connection ends with exactly one reason, one of the end reasons;
//  - EndpointStatistics: connectionsOpen is at most 1 on each side while running and 0 after
//    shutdown; the drop counters never exceed the datagrams received;
//  - the memory bounds (docs/reliable-udp.md, "Memory bound"): receive-buffer memory within the
//    window (in-order data) plus the per-connection budget (out of order) per open connection,
//    and within the endpoint budget; the pool's free chunks within max(floor, half in use); every
//    per-endpoint table (slots, IDs, handshakes, their expiry list, reset tokens, admission
//    counts) bounded by the connections open.
//
// Determinism: no real time; the network's generator has a fixed seed. The endpoints draw their
// connection-ID and cookie keys from std::random_device (in the library), so connection IDs and
// cookies differ between runs, but the harness learns them from the tap and patches them into
// what it injects, so an input means the same thing on every run.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <memory>
#include <string>
#include <vector>

#include "ConnectionOps.h"
#include "FuzzInput.h"
#include "ReliableUDP/Detail/ConnectionCore.h"
#include "ReliableUDP/Detail/Crc32c.h"
#include "ReliableUDP/Detail/KeySchedule.h"
#include "ReliableUDP/Detail/PacketProtection.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/FrameWriting.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"

using timerwheel::fuzz::ConnectionOp;
using timerwheel::fuzz::FuzzInput;
using timerwheel::fuzz::InjectKind;
using timerwheel::fuzz::MessageByte;
using timerwheel::rudp::Connection;
using timerwheel::rudp::Error;
using timerwheel::rudp::detail::ChunkPool;
using timerwheel::rudp::detail::ConnectionId;
using timerwheel::rudp::detail::ConnectionKeys;
using timerwheel::rudp::detail::Crc32c;
using timerwheel::rudp::detail::DecodedPacket;
using timerwheel::rudp::detail::DecodePacket;
using timerwheel::rudp::detail::DecodeStatus;
using timerwheel::rudp::detail::EndpointContext;
using timerwheel::rudp::detail::Frame;
using timerwheel::rudp::detail::FrameReader;
using timerwheel::rudp::detail::FrameType;
using timerwheel::rudp::detail::kAeadTagSize;
using timerwheel::rudp::detail::kHelloSize;
using timerwheel::rudp::detail::kMaxVarInt;
using timerwheel::rudp::detail::kProtocolVersion;
using timerwheel::rudp::detail::Microseconds;
using timerwheel::rudp::detail::PacketNumber;
using timerwheel::rudp::detail::PacketType;
using timerwheel::rudp::detail::PacketWriter;
using timerwheel::test::LinkProfile;
using timerwheel::test::SimulatedHost;
using timerwheel::test::SimulatedNetwork;
using ErrorCode = boost::system::error_code;
using UdpEndpoint = boost::asio::ip::udp::endpoint;

namespace {

constexpr Microseconds kMillisecond = 1000;
constexpr Microseconds kSecond = 1000 * kMillisecond;
constexpr unsigned short kServerPort = 9000;
constexpr unsigned short kClientPort = 9001;
constexpr unsigned short kStrangerPort = 9002;
constexpr int kClient = 0;
constexpr int kServer = 1;
constexpr std::size_t kMaxPendingReceives = 4;
constexpr std::uint64_t kMaxBytesPerSide = 512 * 1024;  // keeps every input fast
constexpr std::size_t kCapturedPerSide = 64;

[[noreturn]] void Fail(const std::string& what) { timerwheel::fuzz::Fail(what.c_str()); }
void Check(bool condition, const std::string& what) {
  if (!condition) Fail(what);
}

bool IsEndReason(const ErrorCode& error) {
  return error == Error::ClosedByPeer || error == Error::ClosedLocally ||
         error == Error::TimedOut || error == Error::Aborted || error == Error::AbortedByPeer ||
         error == Error::ProtocolError || error == Error::EndpointClosed ||
         error == Error::ConnectionReset;
}

void AppendVarInt(std::vector<std::uint8_t>& out, std::uint64_t value) {
  value &= kMaxVarInt;
  const std::size_t size = value <= 0x3F ? 1 : value <= 0x3FFF ? 2 : value <= 0x3FFFFFFF ? 4 : 8;
  const std::uint8_t lengthBits = size == 1 ? 0x00 : size == 2 ? 0x40 : size == 4 ? 0x80 : 0xC0;
  const std::size_t at = out.size();
  for (std::size_t i = size; i > 0; --i)
    out.push_back(static_cast<std::uint8_t>(value >> (8 * (i - 1))));
  out[at] |= lengthBits;
}

void AppendChecksum(std::vector<std::uint8_t>& datagram) {
  const std::uint32_t crc = Crc32c(datagram.data(), datagram.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    datagram.push_back(static_cast<std::uint8_t>(crc >> shift));
}

void FixChecksum(std::vector<std::uint8_t>& datagram) {
  if (datagram.size() < 4) return;
  datagram.resize(datagram.size() - 4);
  AppendChecksum(datagram);
}

// One side's application, and what the tap learned about its endpoint.
struct Side {
  std::shared_ptr<Connection> connection;

  // Sending.
  std::uint64_t nextSendIndex = 0;
  std::map<std::uint64_t, std::vector<std::uint8_t>> sendBuffers;  // alive until the handler
  std::uint64_t bytesQueued = 0;
  // The first send (by index) that failed: no later one may succeed. (Sends made after Close
  // fail at once, before earlier ones still waiting for room in the send buffer succeed.)
  std::uint64_t firstFailed = ~std::uint64_t{0};
  std::uint64_t lastCompleted = 0;   // index + 1 of the last send completed (queued ones)
  std::vector<std::uint8_t> stream;  // the stream of every send that succeeded: prefix + bytes
  std::vector<std::pair<std::uint64_t, std::size_t>> sent;  // (index, size), in stream order

  // Receiving.
  std::array<std::vector<std::uint8_t>, kMaxPendingReceives> receiveBuffers;
  std::array<bool, kMaxPendingReceives> receiveBusy{};
  std::uint64_t nextReceiveSequence = 0;
  std::uint64_t expectedReceiveSequence = 0;
  std::uint64_t delivered = 0;  // messages received by the application
  bool autoReceive = false;

  // The end.
  int endReasons = 0;
  ErrorCode endReason;

  // From the tap.
  ConnectionId id = 0;
  bool sentData = false;
  PacketNumber largestSent = 0;
  std::deque<std::vector<std::uint8_t>> capturedTo;  // real datagrams sent to this side
};

class Harness {
 public:
  explicit Harness(FuzzInput& input) : m_input(input), m_network(1) {}

  void Run() {
    Configure(m_input.Byte());
    Connect();
    while (!m_input.Empty()) {
      Operation();
      CheckStatistics();
    }
    End();
  }

 private:
  // --- handlers: each runs exactly once ----------------------------------------------------------

  std::size_t NewHandler() {
    m_handlerCalls.push_back(0);
    return m_handlerCalls.size() - 1;
  }
  void HandlerRan(std::size_t id) { Check(++m_handlerCalls[id] == 1, "a handler ran twice"); }

  // --- set-up ------------------------------------------------------------------------------------

  void Configure(std::uint8_t bits) {
    timerwheel::rudp::EndpointOptions options;
    if (bits & 1) options.timerQueue = timerwheel::rudp::TimerQueueKind::Heap;
    if (bits & 2) options.congestionControl = timerwheel::rudp::CongestionControl::None;
    if (bits & 4) {
      options.maxMessageSize = 8 * 1024;
      options.receiveWindow = 12 * 1024;
      options.sendBufferSize = 4 * 1024;
    }
    if (bits & 8) options.pacing = false;
    if (bits & 16) {
      options.idleTimeout = 2000;
      options.keepaliveInterval = 500;
      options.handshakeTimeout = 2000;
    }
    m_options = timerwheel::rudp::ValidateOptions(options);
    timerwheel::rudp::EndpointOptions serverOptions = options;
    serverOptions.acceptIncoming = true;
    m_encrypted = (bits & timerwheel::fuzz::kConfigurationEncrypted) != 0;
    if (m_encrypted) {
      // Fixed, so an input means the same on every run (the keys only decide the bytes).
      timerwheel::rudp::ServerKeyPair key;
      key.secretKey.fill(0x5A);
      key.publicKey = timerwheel::rudp::detail::X25519PublicKey(key.secretKey);
      serverOptions.serverSecretKey = key.secretKey;
      options.serverPublicKey = key.publicKey;
    }
    m_hosts[kServer] = &m_network.AddHost(kServerPort, serverOptions);
    m_hosts[kClient] = &m_network.AddHost(kClientPort, options);
    m_network.tap = [this](const UdpEndpoint& from, const UdpEndpoint& to,
                           const std::vector<std::uint8_t>& datagram) { Tap(from, to, datagram); };
  }

  void Connect() {
    const std::size_t accepted = NewHandler();
    m_hosts[kServer]->Accept(
        [this, accepted](ErrorCode error, std::shared_ptr<Connection> connection) {
          HandlerRan(accepted);
          Check(!error && connection, "accept failed: " + error.message());
          m_sides[kServer].connection = std::move(connection);
        });
    const std::size_t connected = NewHandler();
    m_hosts[kClient]->Connect(
        m_hosts[kServer]->Address(),
        [this, connected](ErrorCode error, std::shared_ptr<Connection> connection) {
          HandlerRan(connected);
          Check(!error && connection, "connect failed: " + error.message());
          m_sides[kClient].connection = std::move(connection);
        });
    const bool done = m_network.RunFor(10 * kSecond, [this] {
      return m_sides[kClient].connection && m_sides[kServer].connection;
    });
    Check(done, "the handshake did not complete on a clean network");
    Check(m_sides[kClient].id != 0 && m_sides[kServer].id != 0,
          "the tap did not see both connection IDs");
    for (int side : {kClient, kServer}) {
      const std::size_t closed = NewHandler();
      m_sides[side].connection->AsyncWaitClosed([this, side, closed](ErrorCode error) {
        HandlerRan(closed);
        Side& s = m_sides[side];
        Check(++s.endReasons == 1, "a connection ended twice");
        Check(IsEndReason(error), "a connection ended with " + error.message());
        s.endReason = error;
      });
    }
  }

  // --- the tap: connection IDs, packet numbers, captures, and what real endpoints send ----------

  int SideAt(const UdpEndpoint& address) const {
    if (address == m_hosts[kClient]->Address()) return kClient;
    if (address == m_hosts[kServer]->Address()) return kServer;
    return -1;
  }

  void Tap(const UdpEndpoint& from, const UdpEndpoint& to,
           const std::vector<std::uint8_t>& datagram) {
    const int sender = SideAt(from);
    const int recipient = SideAt(to);
    Check(sender >= 0, "a datagram from an unknown host");
    if (recipient >= 0 && recipient != sender) {
      auto& captured = m_sides[recipient].capturedTo;
      captured.push_back(datagram);
      if (captured.size() > kCapturedPerSide) captured.pop_front();
    }
    DecodedPacket packet;
    Check(DecodePacket(datagram.data(), datagram.size(), packet) == DecodeStatus::Ok,
          "an endpoint sent a datagram that does not decode");
    const auto& header = packet.header;
    if (recipient < 0) return;  // e.g. a Cookie for a Hello injected from a third address
    switch (header.type) {
      case PacketType::Hello:
      case PacketType::HelloWithCookie:
      case PacketType::SecureHelloWithCookie:
        if (sender == kClient && m_sides[kClient].id == 0) m_sides[kClient].id = header.source;
        break;
      case PacketType::Welcome:
      case PacketType::SecureWelcome:
        if (sender == kServer && recipient == kClient) {
          m_sides[kClient].id = header.destination;
          m_sides[kServer].id = header.source;
        }
        break;
      case PacketType::Data:
        NoteSent(sender, packet);
        CheckSentFrames(sender, packet);
        break;
      case PacketType::SecureData:
      case PacketType::SecureDataPhase1:
        NoteSent(sender, packet);
        break;
      default:
        break;
    }
  }

  void NoteSent(int sender, const DecodedPacket& packet) {
    Side& side = m_sides[sender];
    if (!side.sentData || packet.header.packetNumber > side.largestSent) {
      side.largestSent = packet.header.packetNumber;
    }
    side.sentData = true;
  }

  void CheckSentFrames(int sender, const DecodedPacket& packet) {
    const Side& side = m_sides[sender];
    FrameReader reader(packet.frames, packet.framesSize);
    while (!reader.AtEnd()) {
      Frame frame;
      Check(reader.Next(frame) == DecodeStatus::Ok,
            "an endpoint sent a frame that does not decode");
      if (frame.type != FrameType::Stream) continue;
      // Only the bytes of messages whose send has completed are known here; a message being
      // copied into the send buffer may already be partly on its way.
      const std::uint64_t known = side.stream.size();
      const std::uint64_t offset = frame.stream.offset;
      if (offset >= known) continue;
      const std::size_t count =
          static_cast<std::size_t>(std::min<std::uint64_t>(frame.stream.length, known - offset));
      Check(std::memcmp(frame.stream.data, side.stream.data() + offset, count) == 0,
            "an endpoint sent stream bytes its application did not send (offset " +
                std::to_string(offset) + ")");
    }
  }

  // --- operations --------------------------------------------------------------------------------

  void Operation() {
    const auto op =
        static_cast<ConnectionOp>(m_input.Byte() % timerwheel::fuzz::kConnectionOpCount);
    switch (op) {
      case ConnectionOp::Send:
        Send(m_input.Byte() & 1);
        break;
      case ConnectionOp::SendTooLarge:
        SendTooLarge(m_input.Byte() & 1);
        break;
      case ConnectionOp::Receive:
        Receive(m_input.Byte() & 1);
        break;
      case ConnectionOp::AutoReceive: {
        Side& side = m_sides[m_input.Byte() & 1];
        side.autoReceive = !side.autoReceive;
        if (side.autoReceive) Receive(static_cast<int>(&side - m_sides.data()));
        break;
      }
      case ConnectionOp::Advance:
        Advance();
        break;
      case ConnectionOp::Inject:
        Inject(m_input.Byte() & 1);
        break;
      case ConnectionOp::Close: {
        Side& side = m_sides[m_input.Byte() & 1];
        if (side.connection) side.connection->Close();
        break;
      }
      case ConnectionOp::Abort: {
        Side& side = m_sides[m_input.Byte() & 1];
        if (side.connection) side.connection->Abort();
        break;
      }
      case ConnectionOp::Release: {
        Side& side = m_sides[m_input.Byte() & 1];
        side.connection.reset();
        break;
      }
      case ConnectionOp::Link:
        ChangeLink();
        break;
    }
    m_network.RunPosted();
  }

  void Send(int sideIndex) {
    Side& side = m_sides[sideIndex];
    if (!side.connection) return;
    std::size_t size = 0;
    switch (m_input.Byte() % 4) {
      case 0:
        size = m_input.Byte() % 64;
        break;
      case 1:
        size = m_input.U16() % 1500;
        break;
      case 2:
        size = m_input.U16() % 20000;
        break;
      default:
        size = std::size_t{m_input.U16()} * 16;
        break;
    }
    size = std::min(size, m_options.maxMessageSize);
    if (side.bytesQueued + size > kMaxBytesPerSide) return;
    side.bytesQueued += size;
    const std::uint64_t index = side.nextSendIndex++;
    std::vector<std::uint8_t>& buffer = side.sendBuffers[index];
    buffer.resize(size);
    for (std::size_t i = 0; i < size; ++i) buffer[i] = MessageByte(index, i);
    const std::size_t handler = NewHandler();
    side.connection->AsyncSend(boost::asio::buffer(buffer.data(), buffer.size()),
                               [this, sideIndex, index, size, handler](ErrorCode error) {
                                 HandlerRan(handler);
                                 SendCompleted(sideIndex, index, size, error);
                               });
  }

  void SendCompleted(int sideIndex, std::uint64_t index, std::size_t size, ErrorCode error) {
    Side& side = m_sides[sideIndex];
    Check(side.sendBuffers.erase(index) == 1, "a send completed whose buffer is gone");
    if (error) {
      Check(error != Error::MessageTooLarge,
            "a send within the maximum failed with MessageTooLarge");
      side.firstFailed = std::min(side.firstFailed, index);
      return;
    }
    Check(index < side.firstFailed, "a send succeeded after an earlier one had failed");
    Check(index + 1 > side.lastCompleted, "sends completed out of order");
    side.lastCompleted = index + 1;
    AppendVarInt(side.stream, size);
    for (std::size_t i = 0; i < size; ++i) side.stream.push_back(MessageByte(index, i));
    side.sent.emplace_back(index, size);
  }

  // Oversized sends fail at once and send nothing. (They are not in the ordering check: they
  // complete before earlier sends that are still waiting for room in the send buffer.)
  void SendTooLarge(int sideIndex) {
    Side& side = m_sides[sideIndex];
    if (!side.connection) return;
    static const std::vector<std::uint8_t> tooLarge((1 << 20) + 1);
    const std::size_t size = m_options.maxMessageSize + 1;
    const std::size_t handler = NewHandler();
    side.connection->AsyncSend(
        boost::asio::buffer(tooLarge.data(), size), [this, handler](ErrorCode error) {
          HandlerRan(handler);
          // After Close or the end, the end reason comes first.
          Check(error == Error::MessageTooLarge || IsEndReason(error),
                "an oversized send did not fail with MessageTooLarge: " + error.message());
        });
  }

  void Receive(int sideIndex) {
    Side& side = m_sides[sideIndex];
    if (!side.connection) return;
    std::size_t slot = 0;
    while (slot < kMaxPendingReceives && side.receiveBusy[slot]) ++slot;
    if (slot == kMaxPendingReceives) return;
    side.receiveBusy[slot] = true;
    const std::uint64_t sequence = side.nextReceiveSequence++;
    const std::size_t handler = NewHandler();
    side.connection->AsyncReceive(side.receiveBuffers[slot],
                                  [this, sideIndex, slot, sequence, handler](ErrorCode error) {
                                    HandlerRan(handler);
                                    Received(sideIndex, slot, sequence, error);
                                  });
  }

  void Received(int sideIndex, std::size_t slot, std::uint64_t sequence, ErrorCode error) {
    Side& side = m_sides[sideIndex];
    const Side& peer = m_sides[1 - sideIndex];
    Check(sequence == side.expectedReceiveSequence++, "receives completed out of order");
    side.receiveBusy[slot] = false;
    if (error) return;
    const std::vector<std::uint8_t>& message = side.receiveBuffers[slot];
    const std::uint64_t number = side.delivered++;
    Check(number < peer.sent.size(), "delivered message " + std::to_string(number) + ", but only " +
                                         std::to_string(peer.sent.size()) + " were sent");
    const auto [index, size] = peer.sent[number];
    Check(message.size() == size, "message " + std::to_string(number) + " has " +
                                      std::to_string(message.size()) + " bytes, sent " +
                                      std::to_string(size));
    for (std::size_t i = 0; i < size; ++i) {
      if (message[i] != MessageByte(index, i)) {
        Fail("message " + std::to_string(number) + " differs from what was sent at byte " +
             std::to_string(i));
      }
    }
    if (side.autoReceive) Receive(sideIndex);
  }

  void Advance() {
    Microseconds duration = 0;
    switch (m_input.Byte() % 4) {
      case 0:
        duration = 0;
        break;
      case 1:
        duration = Microseconds{m_input.Byte()} * 100;
        break;
      case 2:
        duration = Microseconds{m_input.U16()} * 100;
        break;
      default:
        duration = Microseconds{m_input.U16()} * kMillisecond;
        break;
    }
    m_network.RunFor(duration);
  }

  void ChangeLink() {
    const int from = m_input.Byte() & 1;
    LinkProfile& link = m_network.Link(m_hosts[from]->Address(), m_hosts[1 - from]->Address());
    const unsigned field = m_input.Byte() % 7;
    const std::uint8_t value = m_input.Byte();
    switch (field) {
      case 0:
        link.loss = value / 512.0;
        break;
      case 1:
        link.duplicate = value / 512.0;
        break;
      case 2:
        link.reorder = value / 512.0;
        break;
      case 3:
        link.corrupt = value / 512.0;
        break;
      case 4:
        link.delay = kMillisecond + Microseconds{value} * 500;
        break;
      case 5:
        link.jitter = Microseconds{value} * 200;
        break;
      default:
        link.down = (value & 1) != 0;
        break;
    }
  }

  // --- injection ---------------------------------------------------------------------------------

  PacketNumber ChoosePacketNumber(int impersonated, unsigned mode) {
    const Side& sender = m_sides[impersonated];
    const PacketNumber next = sender.sentData ? sender.largestSent + 1 : 0;
    switch (mode) {
      case 0:
        return next;
      case 1:
        return next + m_input.Byte();
      case 2:
        return sender.largestSent - std::min<PacketNumber>(sender.largestSent, m_input.Byte());
      default:
        return m_input.U64() & kMaxVarInt;
    }
  }

  std::vector<std::uint8_t> DataPacket(int recipient, PacketNumber packetNumber,
                                       const std::vector<std::uint8_t>& frames) {
    std::vector<std::uint8_t> datagram;
    datagram.push_back(0x14);  // version 1, Data
    const ConnectionId id = m_sides[recipient].id;
    for (int shift = 56; shift >= 0; shift -= 8)
      datagram.push_back(static_cast<std::uint8_t>(id >> shift));
    AppendVarInt(datagram, packetNumber);
    datagram.insert(datagram.end(), frames.begin(), frames.end());
    AppendChecksum(datagram);
    return datagram;
  }

  // Encrypted: the packet keys of `sender`'s connection, while its endpoint still has it.
  ConnectionKeys* KeysOf(int sender) {
    if (!m_encrypted) return nullptr;
    timerwheel::rudp::detail::ConnectionCore* const connection =
        m_hosts[sender]->Core().FindConnection(m_sides[sender].id);
    return connection != nullptr ? connection->Keys() : nullptr;
  }

  // A plaintext Data packet sealed as SecureData under `keys` (the header's packet number as the
  // nonce, the frames as they are, well-formed or not), as the keys' owner would seal it.
  static std::vector<std::uint8_t> Seal(ConnectionKeys& keys,
                                        const std::vector<std::uint8_t>& dataPacket) {
    DecodedPacket packet;
    if (DecodePacket(dataPacket.data(), dataPacket.size(), packet) != DecodeStatus::Ok ||
        packet.header.type != PacketType::Data) {
      return dataPacket;
    }
    const auto type = keys.PrepareSend() ? PacketType::SecureDataPhase1 : PacketType::SecureData;
    std::vector<std::uint8_t> datagram;
    datagram.push_back(
        static_cast<std::uint8_t>((kProtocolVersion << 4) | static_cast<std::uint8_t>(type)));
    for (int shift = 56; shift >= 0; shift -= 8)
      datagram.push_back(static_cast<std::uint8_t>(packet.header.destination >> shift));
    AppendVarInt(datagram, packet.header.packetNumber);
    const std::size_t headerSize = datagram.size();
    datagram.insert(datagram.end(), packet.frames, packet.frames + packet.framesSize);
    datagram.resize(datagram.size() + kAeadTagSize);
    keys.Seal(packet.header.packetNumber, datagram.data(), headerSize, packet.framesSize);
    return datagram;
  }

  // ACK frames of `frames` rebased below what `recipient` has really sent (see InjectKind).
  std::vector<std::uint8_t> RebaseAcks(int recipient, const std::vector<std::uint8_t>& frames) {
    const Side& side = m_sides[recipient];
    if (!side.sentData) return frames;
    const PacketNumber top = side.largestSent;
    // Rebasing keeps every distance, so only each ACK's largest can grow (by 7 bytes at most).
    std::vector<std::uint8_t> buffer(3 * frames.size() + 64);
    // A Data packet holding only the frames, to reuse PacketWriter's frame encoders.
    PacketWriter writer(buffer.data(), buffer.size());
    writer.BeginData(0, 0);
    const std::size_t headerSize = 1 + 8 + 1;
    FrameReader reader(frames.data(), frames.size());
    while (!reader.AtEnd()) {
      Frame frame;
      if (reader.Next(frame) != DecodeStatus::Ok) return frames;  // malformed: leave as it is
      if (frame.type == FrameType::Ack) {
        const auto ack = frame.ack;
        const PacketNumber largest = top - std::min(ack.largest, top);
        std::size_t count = 0;
        for (std::size_t k = 0; k < ack.rangeCount; ++k) {
          const std::uint64_t high = ack.largest - ack.ranges[k].largest;  // distance below
          const std::uint64_t low = ack.largest - ack.ranges[k].smallest;
          if (high > largest) break;
          frame.ack.ranges[count].largest = largest - high;
          frame.ack.ranges[count].smallest = low > largest ? 0 : largest - low;
          ++count;
          if (low > largest) break;
        }
        frame.ack.rangeCount = count;
        frame.ack.largest = largest;
      }
      const bool appended = timerwheel::test::AppendFrame(writer, frame);
      if (!appended) return frames;
    }
    const std::size_t framesSize = writer.FramesSize();
    return std::vector<std::uint8_t>(buffer.begin() + headerSize,
                                     buffer.begin() + headerSize + framesSize);
  }

  // Makes a well-formed Data packet to a real connection truthful about stream data (see
  // ConnectionOps.h): STREAM bytes that are not what the application sent are replaced or cut.
  std::vector<std::uint8_t> Truthful(std::vector<std::uint8_t> datagram) {
    DecodedPacket packet;
    if (DecodePacket(datagram.data(), datagram.size(), packet) != DecodeStatus::Ok ||
        packet.header.type != PacketType::Data) {
      return datagram;
    }
    int sender = -1;
    if (packet.header.destination == m_sides[kServer].id) sender = kClient;
    if (packet.header.destination == m_sides[kClient].id) sender = kServer;
    if (sender < 0) return datagram;
    const std::vector<std::uint8_t>& stream = m_sides[sender].stream;
    std::vector<Frame> frames;
    bool truthful = true;
    FrameReader reader(packet.frames, packet.framesSize);
    while (!reader.AtEnd()) {
      Frame frame;
      // A malformed frame makes the receiver drop the whole packet before using any of it.
      if (reader.Next(frame) != DecodeStatus::Ok) return datagram;
      if (frame.type == FrameType::Stream) {
        const auto& s = frame.stream;
        if (s.offset >= stream.size() || s.length > stream.size() - s.offset ||
            std::memcmp(s.data, stream.data() + s.offset, s.length) != 0) {
          truthful = false;
        }
      }
      frames.push_back(frame);
    }
    if (truthful) return datagram;

    std::vector<std::uint8_t> buffer(std::max(datagram.size(), kHelloSize) + 64);
    PacketWriter writer(buffer.data(), buffer.size());
    writer.BeginData(packet.header.destination, packet.header.packetNumber);
    for (const Frame& frame : frames) {
      bool appended = true;
      switch (frame.type) {
        case FrameType::Ping:
          appended = writer.AppendPing();
          break;
        case FrameType::Ack:
          appended = writer.AppendAck(frame.ack.ranges.data(), frame.ack.rangeCount,
                                      frame.ack.ackDelayMicroseconds);
          break;
        case FrameType::Stream: {
          const auto& s = frame.stream;
          if (s.offset >= stream.size()) break;  // beyond what was sent: cut
          const std::size_t count =
              static_cast<std::size_t>(std::min<std::uint64_t>(s.length, stream.size() - s.offset));
          std::size_t written = 0;
          appended = timerwheel::test::AppendStreamFrame(writer, s.offset, stream.data() + s.offset,
                                                         count, &written) &&
                     written == count;
          break;
        }
        case FrameType::MaxData:
          appended = writer.AppendMaxData(frame.maxData);
          break;
        case FrameType::Close:
          appended = writer.AppendClose(frame.closeCode);
          break;
        default:
          break;
      }
      Check(appended, "harness: a rewritten frame did not fit");
    }
    buffer.resize(writer.Finish());
    return buffer;
  }

  void Inject(int recipient) {
    const std::uint8_t mode = m_input.Byte();
    const auto kind = static_cast<InjectKind>(mode & 7);
    const bool stranger = (mode & 8) != 0;
    const unsigned pnMode = (mode >> 4) & 3;
    std::vector<std::uint8_t> datagram;
    switch (kind) {
      case InjectKind::Raw:
        datagram = m_input.Bytes(m_input.U16() % 2048);
        break;
      case InjectKind::RawChecksum:
        datagram = m_input.Bytes(m_input.U16() % 2048);
        AppendChecksum(datagram);
        break;
      case InjectKind::RawHelloSized:
        datagram = m_input.Bytes(m_input.U16() % 2048);
        if (datagram.size() < kHelloSize - 4) datagram.resize(kHelloSize - 4, 0);
        AppendChecksum(datagram);
        break;
      case InjectKind::Data:
      case InjectKind::DataBadChecksum:
      case InjectKind::DataAckRelative: {
        // In this order: packet number arguments, size, frames.
        const PacketNumber packetNumber = ChoosePacketNumber(1 - recipient, pnMode);
        const std::size_t size = m_input.U16() % 1400;
        std::vector<std::uint8_t> frames = m_input.Bytes(size);
        if (kind == InjectKind::DataAckRelative) frames = RebaseAcks(recipient, frames);
        datagram = Truthful(DataPacket(recipient, packetNumber, frames));
        if (ConnectionKeys* keys = KeysOf(1 - recipient)) datagram = Seal(*keys, datagram);
        if (kind == InjectKind::DataBadChecksum) datagram.back() ^= 0x01;
        break;
      }
      case InjectKind::Replay:
      case InjectKind::ReplayMutated: {
        const auto& captured = m_sides[recipient].capturedTo;
        const std::uint8_t which = m_input.Byte();
        if (kind == InjectKind::ReplayMutated) {
          const std::size_t position = m_input.U16();
          const std::uint8_t flip = m_input.Byte();
          if (captured.empty()) return;
          datagram = captured[which % captured.size()];
          if (datagram.size() > 4) {
            datagram[position % (datagram.size() - 4)] ^= flip;
            FixChecksum(datagram);
          }
        } else {
          if (captured.empty()) return;
          datagram = captured[which % captured.size()];
        }
        break;
      }
    }
    datagram = Truthful(std::move(datagram));
    const UdpEndpoint from = stranger
                                 ? UdpEndpoint(m_hosts[kClient]->Address().address(), kStrangerPort)
                                 : m_hosts[1 - recipient]->Address();
    m_hosts[recipient]->Deliver(from, datagram);
  }

  // --- invariants --------------------------------------------------------------------------------

  void CheckStatistics() {
    for (int side : {kClient, kServer}) {
      const auto stats = m_hosts[side]->Statistics();
      Check(stats.connectionsOpen <= 1, std::string(side == kClient ? "client" : "server") +
                                            " has " + std::to_string(stats.connectionsOpen) +
                                            " connections open");
      const std::uint64_t dropped =
          stats.droppedMalformed + stats.droppedBadChecksum + stats.droppedUnknownConnection +
          stats.droppedBadCookie + stats.droppedNotAccepting + stats.droppedBacklogFull +
          stats.droppedUnexpected + stats.droppedTooFragmented + stats.droppedWrongAddress +
          stats.droppedOversize + stats.droppedSourcePortZero;
      Check(dropped <= stats.datagramsReceived, "more datagrams dropped than received");
      Check(stats.connectionsAccepted <= stats.datagramsReceived, "more accepted than received");
      CheckMemoryBounds(side, stats);
    }
  }

  void CheckMemoryBounds(int side, const timerwheel::rudp::EndpointStatistics& stats) {
    const std::string who = side == kClient ? "client" : "server";
    // One chunk of rounding at each end of the in-order data.
    const std::uint64_t chunk = EndpointContext::kReceiveChunkSize;
    const std::uint64_t perConnection =
        m_options.receiveWindow + 2 * chunk + m_options.maxReceiveMemoryPerConnection;
    // A connection that ended keeps its buffered messages while its handle lives: the one
    // connection of each side counts until then.
    Check(stats.receiveMemoryInUse <= perConnection,
          who + " holds " + std::to_string(stats.receiveMemoryInUse) +
              " bytes of receive memory, over the per-connection bound");
    Check(stats.receiveMemoryInUse <= m_options.maxReceiveMemory,
          who + " is over the endpoint's receive budget");
    const std::uint64_t floor = ChunkPool::kDefaultRetainedBytes;
    Check(stats.receiveMemoryAllocated - stats.receiveMemoryInUse <=
              std::max(floor, stats.receiveMemoryInUse / 2),
          who + "'s receive pool keeps more free chunks than its high-water mark");
    const auto tables = m_hosts[side]->Core().Tables();
    const std::size_t open = static_cast<std::size_t>(stats.connectionsOpen);
    Check(tables.slots <= 64 && tables.connectionIds <= open && tables.handshakes <= open &&
              tables.handshakeExpiries <= 2 * open + 64 && tables.resetTokens <= open &&
              tables.admissionAddresses <= open && tables.admissionPrefixes <= open,
          who + "'s tables are larger than its connections allow");
  }

  // With CONNECTION_FUZZER_VERBOSE set: what the input did (for reading a crash or a seed).
  void Report(const char* when) {
    if (std::getenv("CONNECTION_FUZZER_VERBOSE") == nullptr) return;
    std::fprintf(stderr, "%s: t=%.3f s, %llu datagrams sent\n", when,
                 static_cast<double>(m_network.Now() - SimulatedNetwork::kStart) / kSecond,
                 static_cast<unsigned long long>(m_network.Sent()));
    for (int index : {kClient, kServer}) {
      const Side& side = m_sides[index];
      const auto stats = m_hosts[index]->Statistics();
      std::fprintf(stderr,
                   "  %s: %zu messages sent (%zu stream bytes), %llu received, end: %s; "
                   "received %llu datagrams, dropped: malformed %llu, checksum %llu, unknown %llu, "
                   "cookie %llu, unexpected %llu, violation %llu, wrong address %llu, "
                   "not authentic %llu, unprotected %llu\n",
                   index == kClient ? "client" : "server", side.sent.size(), side.stream.size(),
                   static_cast<unsigned long long>(side.delivered),
                   side.endReasons ? side.endReason.message().c_str() : "-",
                   static_cast<unsigned long long>(stats.datagramsReceived),
                   static_cast<unsigned long long>(stats.droppedMalformed),
                   static_cast<unsigned long long>(stats.droppedBadChecksum),
                   static_cast<unsigned long long>(stats.droppedUnknownConnection),
                   static_cast<unsigned long long>(stats.droppedBadCookie),
                   static_cast<unsigned long long>(stats.droppedUnexpected),
                   static_cast<unsigned long long>(stats.droppedProtocolViolation),
                   static_cast<unsigned long long>(stats.droppedWrongAddress),
                   static_cast<unsigned long long>(stats.droppedAuthenticationFailed),
                   static_cast<unsigned long long>(stats.droppedUnprotected));
    }
  }

  void End() {
    Report("after the input");
    // Drop the handles (pending receives complete with operation_aborted), then shut down: every
    // operation still pending completes with EndpointClosed.
    for (Side& side : m_sides) side.connection.reset();
    m_network.RunFor(0);
    for (SimulatedHost* host : m_hosts) host->Shutdown();
    m_network.RunPosted();
    for (std::size_t id = 0; id < m_handlerCalls.size(); ++id) {
      Check(m_handlerCalls[id] == 1, "handler " + std::to_string(id) + " never ran");
    }
    for (int side : {kClient, kServer}) {
      Check(m_sides[side].endReasons == 1, "a connection has no end reason after shutdown");
      Check(m_sides[side].sendBuffers.empty(), "a send is still pending after shutdown");
      const auto stats = m_hosts[side]->Statistics();
      Check(stats.connectionsOpen == 0,
            std::to_string(stats.connectionsOpen) + " connections open after shutdown");
    }
    Report("after shutdown");
  }

  FuzzInput& m_input;
  SimulatedNetwork m_network;
  std::array<SimulatedHost*, 2> m_hosts{};
  std::array<Side, 2> m_sides;
  timerwheel::rudp::EndpointOptions m_options;
  bool m_encrypted = false;
  std::vector<int> m_handlerCalls;
};

}  // namespace

// Each input builds two endpoints whose 1 ms timer wheels hold 60,000 slots: with glibc's
// defaults those blocks come from mmap and go back on every input, and the page faults cost
// more than the rest of a short input. Keep them on the heap.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzInput input(data, size);
  try {
    Harness harness(input);
    harness.Run();
  } catch (const std::exception& error) {
    Fail(std::string("an exception escaped: ") + error.what());
  }
  return 0;
}
