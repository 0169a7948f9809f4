// Writes the seed corpora of the fuzz targets, deterministically (the same bytes on every run):
//
//   MakeSeedCorpus <directory>     writes <directory>/<Target>/seed-*, e.g. Tests/Fuzz/corpus
//
// PacketDecoderFuzzer: one datagram of each packet type and of each frame type, written by
// PacketWriter, each in the checksum-trick form (a 0x01 flag byte, then the datagram without its
// CRC) and, where the type byte is even, also as the raw datagram; plus a few hand-made ones
// (padding, non-minimal varints, malformed frames).
// ConnectionFuzzer: operation sequences (ConnectionOps.h): data exchanges in each option set,
// over lossy and reordering links, closes and aborts, and an exchange captured from two real
// endpoints on the simulated network whose Data packets' frames are injected again (duplicates,
// with ACKs rebased), plus handshake packets (with constant connection IDs and cookie, so that
// the output does not depend on the endpoints' random keys).
// TimerQueueFuzzer: operation sequences (TimerQueueOps.h) for each kind of operation, and a few
// longer ones from a fixed-seed generator.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ConnectionOps.h"
#include "FuzzInput.h"
#include "ReliableUDP/Detail/Crc32c.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/FrameWriting.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"
#include "TimerQueueOps.h"

namespace fs = std::filesystem;
using namespace timerwheel::rudp::detail;
using timerwheel::fuzz::ConnectionOp;
using timerwheel::fuzz::FuzzOutput;
using timerwheel::fuzz::InjectKind;
using timerwheel::fuzz::MessageByte;
using timerwheel::fuzz::TimerOp;
using Bytes = std::vector<std::uint8_t>;

namespace {

fs::path g_root;
int g_written = 0;

void Write(const std::string& target, const std::string& name, const Bytes& bytes) {
  const fs::path directory = g_root / target;
  fs::create_directories(directory);
  std::ofstream out(directory / ("seed-" + name), std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "MakeSeedCorpus: cannot write %s\n", (directory / name).c_str());
    std::exit(1);
  }
  ++g_written;
}

// --- PacketDecoderFuzzer -------------------------------------------------------------------------

constexpr ConnectionId kDestination = 0x0102030405060708;
constexpr ConnectionId kSource = 0x1122334455667788;
const TransportParameters kParameters{6, 2 << 20, 1200, 30'000, 1 << 20};

std::array<std::uint8_t, kCookieSize> Cookie() {
  std::array<std::uint8_t, kCookieSize> cookie{};
  for (std::size_t i = 0; i < cookie.size(); ++i) cookie[i] = static_cast<std::uint8_t>(0xC0 + i);
  return cookie;
}

Bytes Finish(PacketWriter& writer, Bytes& buffer) {
  buffer.resize(writer.Finish());
  return buffer;
}

Bytes Packet(const std::function<void(PacketWriter&)>& build) {
  Bytes buffer(kMaxDatagramSize);
  PacketWriter writer(buffer.data(), buffer.size());
  build(writer);
  return Finish(writer, buffer);
}

Bytes Seal(Bytes body) {
  const std::uint32_t crc = Crc32c(body.data(), body.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    body.push_back(static_cast<std::uint8_t>(crc >> shift));
  return body;
}

// A Data packet with hand-written frame bytes.
Bytes RawData(const Bytes& frames) {
  Bytes body = {0x14, 1, 2, 3, 4, 5, 6, 7, 8, 0x07};
  body.insert(body.end(), frames.begin(), frames.end());
  return Seal(body);
}

// The checksum-trick form: flag byte 0x01, then the datagram without its CRC.
Bytes TrickForm(const Bytes& datagram) {
  Bytes seed = {0x01};
  seed.insert(seed.end(), datagram.begin(), datagram.end() - 4);
  return seed;
}

void WriteDatagram(const std::string& name, const Bytes& datagram) {
  Write("PacketDecoderFuzzer", name + ".crc", TrickForm(datagram));
  if ((datagram[0] & 1) == 0) Write("PacketDecoderFuzzer", name + ".raw", datagram);
}

const Bytes kStreamData = {'h', 'e', 'l', 'l', 'o', ',', ' ', 'w', 'o', 'r', 'l', 'd'};

void PacketDecoderSeeds() {
  WriteDatagram("hello", Packet([](PacketWriter& w) { w.BeginHello(kSource); }));
  WriteDatagram("cookie", Packet([](PacketWriter& w) { w.BeginCookie(kDestination, Cookie()); }));
  WriteDatagram("hello-with-cookie", Packet([](PacketWriter& w) {
                  w.BeginHelloWithCookie(kSource, Cookie(), kParameters);
                }));
  WriteDatagram("welcome", Packet([](PacketWriter& w) {
                  w.BeginWelcome(kDestination, kSource, kParameters);
                }));
  WriteDatagram("data-empty", Packet([](PacketWriter& w) { w.BeginData(kDestination, 0); }));
  WriteDatagram("data-ping", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 1);
                  w.AppendPing();
                }));
  WriteDatagram("data-ack-one-range", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 2);
                  const AckRange range{0, 5};
                  w.AppendAck(&range, 1, 250);
                }));
  WriteDatagram("data-ack-two-ranges", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 3);
                  const AckRange ranges[] = {{90, 100}, {50, 60}};
                  w.AppendAck(ranges, 2, 1234);
                }));
  WriteDatagram("data-ack-32-ranges", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 100'000);
                  std::vector<AckRange> ranges;
                  for (std::uint64_t i = 0; i < 32; ++i) {
                    const std::uint64_t largest = 100'000 - i * 10;
                    ranges.push_back({largest - 3, largest});
                  }
                  w.AppendAck(ranges.data(), ranges.size(), 70'000);
                }));
  WriteDatagram("data-stream", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 4);
                  std::size_t written = 0;
                  timerwheel::test::AppendStreamFrame(w, 0, kStreamData.data(), kStreamData.size(),
                                                      &written);
                }));
  WriteDatagram("data-stream-far", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 0x3FFFFFFF);
                  std::size_t written = 0;
                  timerwheel::test::AppendStreamFrame(w, kMaxVarInt - 5, kStreamData.data(), 5,
                                                      &written);
                }));
  WriteDatagram("data-max-data", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 5);
                  w.AppendMaxData(3 << 20);
                }));
  const CloseCode codes[] = {CloseCode::Graceful, CloseCode::Aborted, CloseCode::ProtocolError};
  for (CloseCode code : codes) {
    WriteDatagram("data-close-" + std::to_string(static_cast<int>(code)),
                  Packet([code](PacketWriter& w) {
                    w.BeginData(kDestination, 6);
                    w.AppendClose(code);
                  }));
  }
  WriteDatagram("data-every-frame", Packet([](PacketWriter& w) {
                  w.BeginData(kDestination, 7);
                  const AckRange ranges[] = {{10, 12}, {3, 7}, {0, 0}};
                  w.AppendAck(ranges, 3, 99);
                  std::size_t written = 0;
                  timerwheel::test::AppendStreamFrame(w, 1000, kStreamData.data(),
                                                      kStreamData.size(), &written);
                  w.AppendMaxData(1 << 21);
                  w.AppendPing();
                  w.AppendClose(CloseCode::Graceful);
                }));
  // Hand-made: padding between frames, non-minimal varints, malformed frames.
  // Issue 14's packets: a refusal, a stateless reset, and the handshake with reset tokens.
  WriteDatagram("refusal", Packet([](PacketWriter& w) { w.BeginRefusal(kDestination); }));
  ResetToken token{};
  for (std::size_t i = 0; i < token.size(); ++i) token[i] = static_cast<std::uint8_t>(0x80 + i);
  WriteDatagram("reset", Packet([&token](PacketWriter& w) { w.BeginReset(kDestination, token); }));
  WriteDatagram("hello-with-cookie-token", Packet([&token](PacketWriter& w) {
                  w.BeginHelloWithCookie(kSource, Cookie(), kParameters, token);
                }));
  WriteDatagram("welcome-token", Packet([&token](PacketWriter& w) {
                  w.BeginWelcome(kDestination, kSource, kParameters, token);
                }));
  // Many tiny STREAM frames far apart, and a datagram of redundant ACK frames.
  {
    Bytes frames;
    for (std::uint8_t i = 0; i < 64; ++i) {
      frames.insert(frames.end(), {0x03, 0x80, 0x00, static_cast<std::uint8_t>(i), 0x00, 0x01, i});
    }
    WriteDatagram("data-scattered-tiny-stream", RawData(frames));
    Bytes acks;
    for (int i = 0; i < 100; ++i) acks.insert(acks.end(), {0x02, 0x10, 0x00, 0x00, 0x10});
    WriteDatagram("data-redundant-acks", RawData(acks));
    Bytes oversize(1800, 0x00);  // PADDING: a Data packet over maxDatagramSize
    oversize.push_back(0x01);
    WriteDatagram("data-oversize", RawData(oversize));
  }
  WriteDatagram("data-padding", RawData({0x00, 0x00, 0x01, 0x00, 0x04, 0x05, 0x00, 0x00}));
  WriteDatagram("data-non-minimal-varints",
                RawData({0x02, 0x40, 0x64, 0x80, 0x00, 0x04, 0xd2, 0x01, 0x0a, 0x1c, 0x0a, 0x03,
                         0xC0, 0,    0,    0,    0,    0,    0,    0x10, 0x40, 0x02, 'h',  'i'}));
  WriteDatagram("data-bad-frame-type", RawData({0x01, 0x06, 0x00}));
  WriteDatagram("data-stream-too-short", RawData({0x03, 0x00, 0x10, 'a', 'b'}));
  WriteDatagram("data-ack-underflow", RawData({0x02, 0x05, 0x00, 0x01, 0x03, 0x05, 0x00}));
}

// --- ConnectionFuzzer ----------------------------------------------------------------------------

constexpr std::uint8_t Op(ConnectionOp op) { return static_cast<std::uint8_t>(op); }
constexpr int kClientSide = 0;
constexpr int kServerSide = 1;

class ConnectionScript {
 public:
  explicit ConnectionScript(std::uint8_t configuration) { m_out.Byte(configuration); }

  // Sizes chosen so that the size classes of ConnectionOps.h give exactly `size`.
  ConnectionScript& Send(int side, std::size_t size) {
    m_out.Byte(Op(ConnectionOp::Send)).Byte(static_cast<std::uint8_t>(side));
    if (size < 64) {
      m_out.Byte(0).Byte(static_cast<std::uint8_t>(size));
    } else if (size < 1500) {
      m_out.Byte(1).U16(static_cast<std::uint16_t>(size));
    } else if (size < 20000) {
      m_out.Byte(2).U16(static_cast<std::uint16_t>(size));
    } else {
      m_out.Byte(3).U16(static_cast<std::uint16_t>(size / 16));
    }
    return *this;
  }
  ConnectionScript& SendTooLarge(int side) {
    m_out.Byte(Op(ConnectionOp::SendTooLarge)).Byte(static_cast<std::uint8_t>(side));
    return *this;
  }
  ConnectionScript& Receive(int side) {
    m_out.Byte(Op(ConnectionOp::Receive)).Byte(static_cast<std::uint8_t>(side));
    return *this;
  }
  ConnectionScript& AutoReceive(int side) {
    m_out.Byte(Op(ConnectionOp::AutoReceive)).Byte(static_cast<std::uint8_t>(side));
    return *this;
  }
  ConnectionScript& AdvanceMs(std::uint16_t milliseconds) {
    m_out.Byte(Op(ConnectionOp::Advance)).Byte(3).U16(milliseconds);
    return *this;
  }
  ConnectionScript& AdvanceTenthsOfMs(std::uint16_t tenths) {
    m_out.Byte(Op(ConnectionOp::Advance)).Byte(2).U16(tenths);
    return *this;
  }
  ConnectionScript& Close(int side) {
    m_out.Byte(Op(ConnectionOp::Close)).Byte(static_cast<std::uint8_t>(side));
    return *this;
  }
  ConnectionScript& Abort(int side) {
    m_out.Byte(Op(ConnectionOp::Abort)).Byte(static_cast<std::uint8_t>(side));
    return *this;
  }
  ConnectionScript& Release(int side) {
    m_out.Byte(Op(ConnectionOp::Release)).Byte(static_cast<std::uint8_t>(side));
    return *this;
  }
  ConnectionScript& Link(int from, std::uint8_t field, std::uint8_t value) {
    m_out.Byte(Op(ConnectionOp::Link))
        .Byte(static_cast<std::uint8_t>(from))
        .Byte(field)
        .Byte(value);
    return *this;
  }
  ConnectionScript& InjectRaw(int recipient, InjectKind kind, const Bytes& bytes,
                              bool stranger = false) {
    m_out.Byte(Op(ConnectionOp::Inject)).Byte(static_cast<std::uint8_t>(recipient));
    m_out.Byte(static_cast<std::uint8_t>(static_cast<unsigned>(kind) | (stranger ? 8u : 0u)));
    m_out.U16(static_cast<std::uint16_t>(bytes.size())).Bytes(bytes);
    return *this;
  }
  ConnectionScript& InjectData(int recipient, InjectKind kind, unsigned pnMode, std::uint8_t pnArg,
                               const Bytes& frames) {
    m_out.Byte(Op(ConnectionOp::Inject)).Byte(static_cast<std::uint8_t>(recipient));
    m_out.Byte(static_cast<std::uint8_t>(static_cast<unsigned>(kind) | (pnMode << 4)));
    if (pnMode == 1 || pnMode == 2) m_out.Byte(pnArg);
    if (pnMode == 3) m_out.U64(pnArg);
    m_out.U16(static_cast<std::uint16_t>(frames.size())).Bytes(frames);
    return *this;
  }
  ConnectionScript& Replay(int recipient, std::uint8_t which) {
    m_out.Byte(Op(ConnectionOp::Inject)).Byte(static_cast<std::uint8_t>(recipient));
    m_out.Byte(static_cast<std::uint8_t>(InjectKind::Replay)).Byte(which);
    return *this;
  }
  ConnectionScript& ReplayMutated(int recipient, std::uint8_t which, std::uint16_t position,
                                  std::uint8_t flip) {
    m_out.Byte(Op(ConnectionOp::Inject)).Byte(static_cast<std::uint8_t>(recipient));
    m_out.Byte(static_cast<std::uint8_t>(InjectKind::ReplayMutated))
        .Byte(which)
        .U16(position)
        .Byte(flip);
    return *this;
  }
  const Bytes& Get() const { return m_out.Get(); }

 private:
  FuzzOutput m_out;
};

void WriteScript(const std::string& name, const ConnectionScript& script) {
  Write("ConnectionFuzzer", name, script.Get());
}

// The script, and the same with encryption on ("<name>-encrypted"): its injected Data packets
// are then sealed with the impersonated sender's keys (ConnectionOps.h, bit 5 of byte 0).
void WriteScriptBothWays(const std::string& name, const ConnectionScript& script) {
  WriteScript(name, script);
  Bytes encrypted = script.Get();
  encrypted.at(0) |= timerwheel::fuzz::kConfigurationEncrypted;
  Write("ConnectionFuzzer", name + "-encrypted", encrypted);
}

// A real exchange between two endpoints on the simulated network, with the same application
// messages (MessageByte) the fuzzer's harness sends: the frames of every Data packet, by
// direction (0: to the server).
struct CapturedExchange {
  std::vector<Bytes> frames[2];
};

CapturedExchange Capture(const std::vector<std::size_t>& clientSizes,
                         const std::vector<std::size_t>& serverSizes) {
  using namespace timerwheel::test;
  CapturedExchange captured;
  SimulatedNetwork network(1);
  timerwheel::rudp::EndpointOptions serverOptions;
  serverOptions.acceptIncoming = true;
  SimulatedHost& server = network.AddHost(9000, serverOptions);
  SimulatedHost& client = network.AddHost(9001, {});
  network.tap = [&](const Udp::endpoint&, const Udp::endpoint& to, const Bytes& datagram) {
    DecodedPacket packet;
    if (DecodePacket(datagram.data(), datagram.size(), packet) != DecodeStatus::Ok ||
        packet.header.type != PacketType::Data) {
      return;
    }
    captured.frames[to == server.Address() ? 0 : 1].emplace_back(packet.frames,
                                                                 packet.frames + packet.framesSize);
  };
  std::shared_ptr<timerwheel::rudp::Connection> sides[2];
  server.Accept([&](boost::system::error_code, std::shared_ptr<timerwheel::rudp::Connection> c) {
    sides[1] = std::move(c);
  });
  client.Connect(server.Address(),
                 [&](boost::system::error_code, std::shared_ptr<timerwheel::rudp::Connection> c) {
                   sides[0] = std::move(c);
                 });
  network.RunFor(10'000'000, [&] { return sides[0] && sides[1]; });
  if (!sides[0] || !sides[1]) {
    std::fprintf(stderr, "MakeSeedCorpus: the captured handshake failed\n");
    std::exit(1);
  }
  std::vector<std::vector<std::uint8_t>> messages;
  messages.reserve(clientSizes.size() + serverSizes.size());
  std::vector<std::uint8_t> received[2];
  int pending = 0;
  for (int side = 0; side < 2; ++side) {
    const auto& sizes = side == 0 ? clientSizes : serverSizes;
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      messages.emplace_back(sizes[index]);
      for (std::size_t i = 0; i < sizes[index]; ++i) messages.back()[i] = MessageByte(index, i);
      sides[side]->AsyncSend(boost::asio::buffer(messages.back()),
                             [](boost::system::error_code) {});
      ++pending;
    }
  }
  // Receive everything, then close from the client.
  std::function<void(int)> receive = [&](int side) {
    sides[side]->AsyncReceive(received[side], [&, side](boost::system::error_code error) {
      if (error) return;
      --pending;
      receive(side);
    });
  };
  receive(0);
  receive(1);
  network.RunFor(5'000'000, [&] { return pending == 0; });
  sides[0]->Close();
  network.RunFor(5'000'000);
  return captured;
}

void ConnectionSeeds() {
  const int C = kClientSide;
  const int S = kServerSide;
  // Plain exchanges, in each option set.
  for (std::uint8_t configuration : {0, 1, 2, 4, 8, 16, 4 | 16, 1 | 2 | 8}) {
    ConnectionScript script(configuration);
    script.AutoReceive(S).AutoReceive(C).Send(C, 10).Send(C, 1200).Send(C, 5000).AdvanceMs(200);
    script.Send(S, 0).Send(S, 40'000).AdvanceMs(500).Close(C).AdvanceMs(3000);
    WriteScript("exchange-config-" + std::to_string(configuration), script);
  }
  // Back-pressure and flow control: a slow reader with small windows.
  {
    ConnectionScript script(4);
    for (int i = 0; i < 6; ++i) script.Send(C, 8000);
    script.AdvanceMs(100).Receive(S).AdvanceMs(100).Receive(S).Receive(S).AdvanceMs(300);
    script.AutoReceive(S).AdvanceMs(1000).SendTooLarge(C).Close(S).AdvanceMs(2000);
    WriteScript("slow-reader", script);
  }
  // Loss, duplication, reordering and corruption both ways.
  {
    ConnectionScript script(0);
    for (int from : {C, S})
      script.Link(from, 0, 50).Link(from, 1, 20).Link(from, 2, 30).Link(from, 3, 20);
    script.AutoReceive(S).AutoReceive(C);
    for (int i = 0; i < 10; ++i) script.Send(C, 3000).Send(S, 700);
    script.AdvanceMs(5000).Close(S).AdvanceMs(5000);
    WriteScriptBothWays("lossy-links", script);
  }
  // A link that goes down: keepalive and idle timeout.
  {
    ConnectionScript script(16);
    script.AutoReceive(S).Send(C, 100).AdvanceMs(100).Link(C, 6, 1).Link(S, 6, 1).Send(C, 100);
    script.AdvanceMs(1000).AdvanceMs(3000);
    WriteScript("link-down-idle-timeout", script);
  }
  // Abort, release, close from both sides at once.
  {
    ConnectionScript script(0);
    script.Send(C, 500).Receive(S).AdvanceTenthsOfMs(50).Abort(C).AdvanceMs(100).Send(S, 5);
    WriteScript("abort", script);
    ConnectionScript release(0);
    release.AutoReceive(S).Send(C, 500).Release(C).Send(S, 10).AdvanceMs(1000);
    WriteScript("release", release);
    ConnectionScript crossing(0);
    crossing.AutoReceive(S).AutoReceive(C).Send(C, 100).Send(S, 100).Close(C).Close(S).AdvanceMs(
        2000);
    WriteScript("crossing-closes", crossing);
  }
  // A captured exchange: the same sends, then its Data packets' frames injected again (as
  // duplicates with fresh packet numbers, with old packet numbers, with ACKs rebased), replays
  // of captured datagrams, and handshake packets.
  {
    const std::vector<std::size_t> clientSizes = {10, 3000, 200};
    const std::vector<std::size_t> serverSizes = {50};
    const CapturedExchange captured = Capture(clientSizes, serverSizes);
    ConnectionScript script(0);
    script.AutoReceive(S).AutoReceive(C);
    for (std::size_t size : clientSizes) script.Send(C, size);
    for (std::size_t size : serverSizes) script.Send(S, size);
    script.AdvanceMs(300);
    for (int direction = 0; direction < 2; ++direction) {
      const int recipient = direction == 0 ? S : C;
      std::size_t count = 0;
      for (const Bytes& frames : captured.frames[direction]) {
        if (++count > 12) break;
        script.InjectData(recipient, InjectKind::Data, count % 3 == 0 ? 2 : 0, 1, frames);
        if (count % 4 == 0) script.InjectData(recipient, InjectKind::DataAckRelative, 0, 0, frames);
      }
    }
    script.AdvanceMs(50).Replay(S, 0).Replay(C, 1).ReplayMutated(S, 2, 12, 0x40).AdvanceMs(100);
    // Handshake packets with constant IDs and cookie: a Hello and a HelloWithCookie to the server
    // (the cookie is refused), a Cookie and a Welcome to the client (unexpected now).
    const Bytes hello = Packet([](PacketWriter& w) { w.BeginHello(kSource); });
    const Bytes helloWithCookie =
        Packet([](PacketWriter& w) { w.BeginHelloWithCookie(kSource, Cookie(), kParameters); });
    const Bytes cookie = Packet([](PacketWriter& w) { w.BeginCookie(kDestination, Cookie()); });
    const Bytes welcome =
        Packet([](PacketWriter& w) { w.BeginWelcome(kDestination, kSource, kParameters); });
    auto body = [](const Bytes& datagram) { return Bytes(datagram.begin(), datagram.end() - 4); };
    script.InjectRaw(S, InjectKind::RawChecksum, body(hello));
    script.InjectRaw(S, InjectKind::RawChecksum, body(hello), /*stranger*/ true);
    script.InjectRaw(S, InjectKind::RawChecksum, body(helloWithCookie));
    script.InjectRaw(C, InjectKind::RawChecksum, body(cookie));
    script.InjectRaw(C, InjectKind::RawChecksum, body(welcome));
    const Bytes helloHeader(hello.begin(), hello.begin() + 17);  // zero-padded by the harness
    script.InjectRaw(S, InjectKind::RawHelloSized, helloHeader);
    script.InjectRaw(S, InjectKind::Raw, hello);
    script.AdvanceMs(1000).Close(C).AdvanceMs(2000);
    WriteScriptBothWays("captured-exchange", script);
  }
  // Forged control frames to the server: a PING, an ACK of everything, MAX_DATA, CLOSE.
  {
    ConnectionScript script(0);
    script.AutoReceive(S).Send(C, 2000).AdvanceTenthsOfMs(5).Send(S, 3000);
    script.InjectData(S, InjectKind::Data, 0, 0, {0x01});
    script.InjectData(S, InjectKind::DataAckRelative, 0, 0, {0x02, 0x00, 0x00, 0x00, 0x05});
    script.InjectData(S, InjectKind::Data, 1, 3, {0x04, 0x80, 0x40, 0x00, 0x00});
    script.InjectData(S, InjectKind::Data, 2, 1, {0x03, 0x00, 0x05, 0, 0, 0, 0, 0});
    script.InjectData(S, InjectKind::DataBadChecksum, 0, 0, {0x01});
    script.AdvanceMs(100).InjectData(S, InjectKind::Data, 0, 0, {0x05, 0x00}).AdvanceMs(2000);
    WriteScriptBothWays("forged-frames", script);
  }
  // Issue 14's shapes. Scattered tiny STREAM frames: the client's 60 KB message is held back
  // (link down), then the server gets one-byte pieces of it 1 KiB apart, out of order, then the
  // rest arrives.
  {
    ConnectionScript script(0);
    script.AutoReceive(S).Link(C, 6, 1).Send(C, 60'000).AdvanceMs(10);
    for (int i = 0; i < 40; ++i) {
      const auto offset = static_cast<std::uint16_t>(100 + 1024 * (40 - i));
      script.InjectData(S, InjectKind::Data, 0, 0,
                        {0x03, static_cast<std::uint8_t>(0x40 | (offset >> 8)),
                         static_cast<std::uint8_t>(offset), 0x01, 0x00});
    }
    script.Link(C, 6, 0).AdvanceMs(3000).Close(C).AdvanceMs(2000);
    WriteScriptBothWays("scattered-tiny-stream", script);
  }
  // Redundant ACK floods: datagrams of the same ACK frame again and again.
  {
    ConnectionScript script(0);
    script.AutoReceive(S).Send(S, 20'000).AdvanceTenthsOfMs(5);
    Bytes acks;
    for (int i = 0; i < 200; ++i) acks.insert(acks.end(), {0x02, 0x00, 0x00, 0x00, 0x00});
    for (int i = 0; i < 20; ++i) script.InjectData(C, InjectKind::DataAckRelative, 0, 0, acks);
    script.AdvanceMs(2000);
    WriteScriptBothWays("redundant-ack-flood", script);
  }
  // Handshake churn: Hellos from the peer's and a stranger's address, each a new client ID.
  {
    ConnectionScript script(0);
    for (std::uint8_t i = 0; i < 30; ++i) {
      const Bytes hello = Packet([i](PacketWriter& w) { w.BeginHello(kSource + i); });
      script.InjectRaw(S, InjectKind::RawHelloSized, Bytes(hello.begin(), hello.begin() + 17),
                       i % 2 == 0);
    }
    script.AdvanceMs(100).Send(C, 100).AdvanceMs(1000);
    WriteScript("handshake-churn", script);
  }
  // A stateless reset: the server's abort is lost, the client keeps sending and is reset; and
  // forged Resets and Refusals (unknown token and ID) that must change nothing.
  {
    ConnectionScript script(16);
    script.AutoReceive(C).Link(S, 6, 1).Abort(S).AdvanceMs(10).Link(S, 6, 0).Send(C, 300);
    script.AdvanceMs(1000);
    WriteScriptBothWays("stateless-reset", script);
    ConnectionScript forged(0);
    const Bytes reset = Packet([](PacketWriter& w) { w.BeginReset(kDestination, ResetToken{1}); });
    const Bytes refusal = Packet([](PacketWriter& w) { w.BeginRefusal(kDestination); });
    auto body = [](const Bytes& datagram) { return Bytes(datagram.begin(), datagram.end() - 4); };
    forged.AutoReceive(S).Send(C, 500).AdvanceTenthsOfMs(5);
    forged.InjectRaw(C, InjectKind::RawChecksum, body(reset));
    forged.InjectRaw(S, InjectKind::RawChecksum, body(reset));
    forged.InjectRaw(C, InjectKind::RawChecksum, body(refusal));
    forged.AdvanceMs(500).Close(C).AdvanceMs(2000);
    WriteScript("forged-reset-and-refusal", forged);
  }
  // What the socket-level hostile benchmark sends: Data packets larger than maxDatagramSize (to be
  // dropped before parsing, live connection ID and all), raw oversize junk, and a burst of
  // replays of one real datagram.
  {
    ConnectionScript script(0);
    script.AutoReceive(S).Send(C, 500).AdvanceTenthsOfMs(5);
    Bytes padded(1390, 0x00);
    padded.push_back(0x01);
    script.InjectData(S, InjectKind::Data, 0, 0, padded);
    script.InjectRaw(S, InjectKind::Raw, Bytes(1500, 0x14));
    for (int i = 0; i < 40; ++i) script.Replay(S, 0);
    script.AdvanceMs(500).Close(C).AdvanceMs(2000);
    WriteScriptBothWays("oversize-and-replay-burst", script);
  }
}

// --- TimerQueueFuzzer ----------------------------------------------------------------------------

constexpr std::uint8_t T(TimerOp op) { return static_cast<std::uint8_t>(op); }

void TimerQueueSeeds() {
  auto write = [](const std::string& name, const Bytes& bytes) {
    Write("TimerQueueFuzzer", name, bytes);
  };
  // Timeout selectors: 0 zero, 1 small, 2 maximum, 3 <= 5000 (U16), 7 granularities (byte).
  write("set-and-fire", {T(TimerOp::Create), T(TimerOp::Set), 0, 1, 7, 0, T(TimerOp::NextTimeout),
                         T(TimerOp::AdvanceToNextAndDispatch), 0, 0, 0, T(TimerOp::NextTimeout)});
  write("update-every-condition", {T(TimerOp::Create),
                                   T(TimerOp::Set),
                                   0,
                                   3,
                                   0x10,
                                   0x00,
                                   0,  //
                                   T(TimerOp::Update),
                                   0,
                                   3,
                                   0x08,
                                   0x00,
                                   1,  // sooner
                                   T(TimerOp::Update),
                                   0,
                                   3,
                                   0x20,
                                   0x00,
                                   2,  // later
                                   T(TimerOp::Update),
                                   0,
                                   3,
                                   0x01,
                                   0x00,
                                   3,  // keep time
                                   T(TimerOp::Update),
                                   0,
                                   1,
                                   3,
                                   0,  // always
                                   T(TimerOp::IsSet),
                                   0,
                                   T(TimerOp::AdvanceToNextAndDispatch),
                                   0,
                                   0,
                                   0,  //
                                   T(TimerOp::Update),
                                   0,
                                   7,
                                   2,
                                   2,
                                   T(TimerOp::Cancel),
                                   0,
                                   T(TimerOp::IsSet),
                                   0});
  write("set-if-not-set", {T(TimerOp::Create), T(TimerOp::Set), 0, 7, 3, 0, T(TimerOp::Set), 0, 7,
                           1, 1, T(TimerOp::AdvanceSmall), 45, T(TimerOp::Dispatch), 0, 0, 0});
  write("one-shots-and-budgets", {T(TimerOp::OneShot),
                                  0,
                                  T(TimerOp::OneShot),
                                  0,
                                  T(TimerOp::OneShot),
                                  1,
                                  2,
                                  T(TimerOp::OneShot),
                                  7,
                                  1,
                                  T(TimerOp::AdvanceSmall),
                                  45,
                                  T(TimerOp::Dispatch),
                                  1,
                                  0,
                                  1,
                                  1,
                                  0,
                                  1,
                                  2,
                                  1,
                                  5,
                                  0,
                                  T(TimerOp::NextTimeout),
                                  T(TimerOp::Dispatch),
                                  0,
                                  0,
                                  0});
  write("callbacks-mutate-and-throw", {T(TimerOp::Create),
                                       T(TimerOp::Set),
                                       0,
                                       0,
                                       0,
                                       T(TimerOp::OneShot),
                                       0,
                                       T(TimerOp::OneShot),
                                       0,
                                       T(TimerOp::AdvanceSmall),
                                       1,
                                       T(TimerOp::Dispatch),
                                       0,
                                       5,
                                       T(TimerOp::Set),
                                       0,
                                       1,
                                       4,
                                       0,   // first callback: re-arms timer 0
                                       30,  // second callback throws
                                       0,
                                       0,
                                       0});
  write("destroy-and-stale-handles", {T(TimerOp::Create),
                                      T(TimerOp::Create),
                                      T(TimerOp::Set),
                                      1,
                                      2,
                                      0,
                                      T(TimerOp::Destroy),
                                      1,
                                      T(TimerOp::BadHandle),
                                      1,
                                      0,
                                      T(TimerOp::BadHandle),
                                      1,
                                      1,
                                      T(TimerOp::BadHandle),
                                      1,
                                      2,
                                      T(TimerOp::BadHandle),
                                      1,
                                      3,
                                      T(TimerOp::BadHandle),
                                      1,
                                      4,
                                      T(TimerOp::BadHandle),
                                      0,
                                      0,
                                      T(TimerOp::Create),
                                      T(TimerOp::BadHandle),
                                      1,
                                      0,
                                      T(TimerOp::CheckInvariants)});
  write("over-maximum", {T(TimerOp::Create),
                         T(TimerOp::Set),
                         0,
                         2,
                         0,
                         T(TimerOp::OverMaximum),
                         0,
                         0,
                         0,
                         0,
                         0,
                         0,
                         0,
                         T(TimerOp::OverMaximum),
                         0,
                         1,
                         0xFF,
                         0xFF,
                         0xFF,
                         0xFF,
                         2,
                         T(TimerOp::OverMaximum),
                         0,
                         2,
                         5,
                         0,
                         0,
                         0,
                         0,
                         T(TimerOp::NextTimeout)});
  write("long-gaps", {T(TimerOp::Create),
                      T(TimerOp::Set),
                      0,
                      2,
                      0,
                      T(TimerOp::OneShot),
                      3,
                      0x88,
                      0x13,
                      T(TimerOp::LongGap),
                      1,
                      0x40,
                      0x0D,
                      0x03,
                      0,
                      0,
                      0,
                      0,
                      0,
                      T(TimerOp::NextTimeout),
                      T(TimerOp::Dispatch),
                      0,
                      0,
                      0,
                      T(TimerOp::LongGap),
                      0,
                      0xFF,
                      0xFF,
                      0xFF,
                      0xFF,
                      0xFF,
                      0xFF,
                      0xFF,
                      0x0F,
                      T(TimerOp::NextTimeout),
                      T(TimerOp::AdvanceToNextAndDispatch),
                      0,
                      0,
                      0});
  // Longer sequences from a fixed-seed generator, biased towards the common operations.
  std::mt19937_64 random(20240601);
  for (int n = 0; n < 4; ++n) {
    Bytes bytes;
    for (int i = 0; i < 400; ++i) bytes.push_back(static_cast<std::uint8_t>(random()));
    write("random-" + std::to_string(n), bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus directory>   (e.g. Tests/Fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  PacketDecoderSeeds();
  ConnectionSeeds();
  TimerQueueSeeds();
  std::printf("MakeSeedCorpus: wrote %d seeds under %s\n", g_written, g_root.c_str());
  return 0;
}
