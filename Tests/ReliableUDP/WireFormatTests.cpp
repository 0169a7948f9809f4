// Datagram encoding and decoding, varints, ACK ranges, malformed input, and the CRC-32C trailer.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/Crc32c.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/FrameWriting.h"

using namespace timerwheel::rudp::detail;

namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr std::uint8_t kDataTypeByte = (kProtocolVersion << 4) | 4;

// Appends the big-endian CRC-32C of everything before it, as a sender would.
Bytes Seal(Bytes body) {
  const std::uint32_t crc = Crc32c(body.data(), body.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    body.push_back(static_cast<std::uint8_t>(crc >> shift));
  return body;
}

// A Data packet header for destination 0x0102030405060708 and packet number 7, frames to follow.
Bytes DataHeader() { return {kDataTypeByte, 1, 2, 3, 4, 5, 6, 7, 8, 0x07}; }

Bytes SealedData(const Bytes& frames) {
  Bytes body = DataHeader();
  body.insert(body.end(), frames.begin(), frames.end());
  return Seal(body);
}

// Decodes in an exactly sized heap copy so that AddressSanitizer flags any read past the end.
// `datagram` must outlive the use of out.frames, which points into it.
DecodeStatus Decode(const Bytes& datagram, DecodedPacket& out) {
  std::unique_ptr<std::uint8_t[]> copy(
      new std::uint8_t[datagram.size() + (datagram.empty() ? 1 : 0)]);
  if (!datagram.empty()) std::memcpy(copy.get(), datagram.data(), datagram.size());
  const DecodeStatus status = DecodePacket(copy.get(), datagram.size(), out);
  // The frames pointer must not outlive the copy: rebase it onto the caller's vector.
  if (status == DecodeStatus::Ok && out.frames != nullptr) {
    out.frames = datagram.data() + (out.frames - copy.get());
  }
  return status;
}

// Decodes a Data packet's frames; returns the first non-Ok status (Ok if all decoded).
DecodeStatus ReadFrames(const DecodedPacket& packet, std::vector<Frame>& frames) {
  FrameReader reader(packet.frames, packet.framesSize);
  while (!reader.AtEnd()) {
    Frame frame;
    const DecodeStatus status = reader.Next(frame);
    if (status != DecodeStatus::Ok) return status;
    frames.push_back(frame);
  }
  return DecodeStatus::Ok;
}

// The first frame of a sealed Data packet holding `frameBytes`. A stream frame's data points into
// a buffer kept until the next call.
DecodeStatus DecodeSingleFrame(const Bytes& frameBytes, Frame& frame) {
  static Bytes datagram;
  DecodedPacket packet;
  datagram = SealedData(frameBytes);
  const DecodeStatus status = Decode(datagram, packet);
  REQUIRE(status == DecodeStatus::Ok);
  FrameReader reader(packet.frames, packet.framesSize);
  REQUIRE_FALSE(reader.AtEnd());
  return reader.Next(frame);
}

class Writer {
 public:
  explicit Writer(std::size_t capacity = 1500)
      : buffer(capacity), writer(buffer.data(), capacity) {}
  Bytes Finish() {
    const std::size_t size = writer.Finish();
    return Bytes(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(size));
  }
  Bytes buffer;
  PacketWriter writer;
};

TransportParameters SampleParameters() {
  TransportParameters parameters;
  parameters.maxAckDelayMs = 25;
  parameters.initialMaxData = 1 << 20;
  parameters.maxDatagramSize = 1452;
  parameters.idleTimeoutMs = 30000;
  parameters.maxMessageSize = kMaxVarInt;
  return parameters;
}

void CheckParameters(const TransportParameters& actual, const TransportParameters& expected) {
  CHECK(actual.maxAckDelayMs == expected.maxAckDelayMs);
  CHECK(actual.initialMaxData == expected.initialMaxData);
  CHECK(actual.maxDatagramSize == expected.maxDatagramSize);
  CHECK(actual.idleTimeoutMs == expected.idleTimeoutMs);
  CHECK(actual.maxMessageSize == expected.maxMessageSize);
}

std::array<std::uint8_t, kCookieSize> SampleCookie() {
  std::array<std::uint8_t, kCookieSize> cookie{};
  for (std::size_t i = 0; i < cookie.size(); ++i) cookie[i] = static_cast<std::uint8_t>(0xA0 + i);
  return cookie;
}

// Bit-at-a-time CRC-32C straight from the definition, to check the table-driven version against.
std::uint32_t ReferenceCrc32c(const std::uint8_t* data, std::size_t size) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

}  // namespace

// ---- Packets ------------------------------------------------------------------------------------

TEST_CASE("a Hello round-trips and is padded with zeros to exactly kHelloSize", "[rudp][wire]") {
  Writer w;
  w.writer.BeginHello(0x1122334455667788u);
  const Bytes datagram = w.Finish();
  REQUIRE(datagram.size() == kHelloSize);
  CHECK(datagram[0] == ((kProtocolVersion << 4) | 0));
  for (std::size_t i = 1; i < 9; ++i) CHECK(datagram[i] == 0);
  CHECK(datagram[9] == 0x11);
  CHECK(datagram[16] == 0x88);
  for (std::size_t i = 17; i < kHelloSize - kChecksumSize; ++i) REQUIRE(datagram[i] == 0);

  DecodedPacket packet;
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::Hello);
  CHECK(packet.header.destination == 0);
  CHECK(packet.header.source == 0x1122334455667788u);
  CHECK(packet.framesSize == 0);
}

TEST_CASE("a Cookie round-trips with the destination and all 24 cookie bytes", "[rudp][wire]") {
  Writer w;
  w.writer.BeginCookie(0xCAFEu, SampleCookie());
  const Bytes datagram = w.Finish();
  CHECK(datagram.size() == 1 + 8 + kCookieSize + kChecksumSize);
  DecodedPacket packet;
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::Cookie);
  CHECK(packet.header.destination == 0xCAFEu);
  CHECK(packet.header.cookie == SampleCookie());

  Bytes cut = datagram;
  cut.resize(cut.size() - kChecksumSize - 1);
  CHECK(Decode(Seal(cut), packet) == DecodeStatus::TooShort);
}

TEST_CASE("a HelloWithCookie round-trips source, cookie and parameters, padded to kHelloSize",
          "[rudp][wire]") {
  Writer w;
  w.writer.BeginHelloWithCookie(0xABCDEFu, SampleCookie(), SampleParameters());
  const Bytes datagram = w.Finish();
  REQUIRE(datagram.size() == kHelloSize);
  DecodedPacket packet;
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::HelloWithCookie);
  CHECK(packet.header.destination == 0);
  CHECK(packet.header.source == 0xABCDEFu);
  CHECK(packet.header.cookie == SampleCookie());
  CheckParameters(packet.header.parameters, SampleParameters());
}

TEST_CASE("a Welcome round-trips both connection IDs and the parameters", "[rudp][wire]") {
  Writer w;
  w.writer.BeginWelcome(0x1111u, 0x2222u, SampleParameters());
  const Bytes datagram = w.Finish();
  // Header, server CID, parameters (1 + 4 + 2 + 4 + 8 bytes of varints), reset token, checksum.
  CHECK(datagram.size() == 1 + 8 + 8 + 19 + kResetTokenSize + kChecksumSize);
  DecodedPacket packet;
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::Welcome);
  CHECK(packet.header.destination == 0x1111u);
  CHECK(packet.header.source == 0x2222u);
  CheckParameters(packet.header.parameters, SampleParameters());

  Bytes cut = datagram;
  cut.resize(cut.size() - kChecksumSize - 1);  // the last parameter loses a byte
  CHECK(Decode(Seal(cut), packet) == DecodeStatus::TooShort);
}

TEST_CASE("a Data packet round-trips every frame type in order", "[rudp][wire]") {
  Writer w;
  w.writer.BeginData(0x0102030405060708u, 1000);
  const std::uint8_t payload[] = {'h', 'e', 'l', 'l', 'o'};
  const AckRange ranges[] = {{90, 100}, {50, 60}};
  std::size_t written = 0;
  REQUIRE(w.writer.AppendPing());
  REQUIRE(w.writer.AppendAck(ranges, 2, 1234));
  REQUIRE(timerwheel::test::AppendStreamFrame(w.writer, 4096, payload, sizeof(payload), &written));
  CHECK(written == sizeof(payload));
  REQUIRE(w.writer.AppendMaxData(1 << 24));
  REQUIRE(w.writer.AppendClose(CloseCode::Aborted));
  const Bytes datagram = w.Finish();

  DecodedPacket packet;
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::Data);
  CHECK(packet.header.destination == 0x0102030405060708u);
  CHECK(packet.header.packetNumber == 1000);
  CHECK(packet.frames == datagram.data() + 1 + 8 + 2);
  CHECK(packet.framesSize == datagram.size() - 1 - 8 - 2 - kChecksumSize);

  std::vector<Frame> frames;
  REQUIRE(ReadFrames(packet, frames) == DecodeStatus::Ok);
  REQUIRE(frames.size() == 5);
  CHECK(frames[0].type == FrameType::Ping);
  REQUIRE(frames[1].type == FrameType::Ack);
  CHECK(frames[1].ack.largest == 100);
  CHECK(frames[1].ack.ackDelayMicroseconds == 1234);
  REQUIRE(frames[1].ack.rangeCount == 2);
  CHECK(frames[1].ack.ranges[0].smallest == 90);
  CHECK(frames[1].ack.ranges[0].largest == 100);
  CHECK(frames[1].ack.ranges[1].smallest == 50);
  CHECK(frames[1].ack.ranges[1].largest == 60);
  REQUIRE(frames[2].type == FrameType::Stream);
  CHECK(frames[2].stream.offset == 4096);
  REQUIRE(frames[2].stream.length == sizeof(payload));
  CHECK(std::memcmp(frames[2].stream.data, payload, sizeof(payload)) == 0);
  REQUIRE(frames[3].type == FrameType::MaxData);
  CHECK(frames[3].maxData == (1u << 24));
  REQUIRE(frames[4].type == FrameType::Close);
  CHECK(frames[4].closeCode == CloseCode::Aborted);
}

TEST_CASE("a Data packet may carry no frames", "[rudp][wire]") {
  Writer w;
  w.writer.BeginData(5, 0);
  const Bytes datagram = w.Finish();
  CHECK(datagram.size() == 1 + 8 + 1 + kChecksumSize);
  DecodedPacket packet;
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  CHECK(packet.framesSize == 0);
  CHECK(FrameReader(packet.frames, packet.framesSize).AtEnd());

  Bytes noPacketNumber = {kDataTypeByte, 0, 0, 0, 0, 0, 0, 0, 5};
  CHECK(Decode(Seal(noPacketNumber), packet) == DecodeStatus::TooShort);
}

TEST_CASE("every close code round-trips and unknown codes decode as ProtocolError",
          "[rudp][wire]") {
  for (const CloseCode code : {CloseCode::Graceful, CloseCode::Aborted, CloseCode::ProtocolError}) {
    Writer w;
    w.writer.BeginData(1, 1);
    REQUIRE(w.writer.AppendClose(code));
    DecodedPacket packet;
    const Bytes datagram = w.Finish();
    REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
    std::vector<Frame> frames;
    REQUIRE(ReadFrames(packet, frames) == DecodeStatus::Ok);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].closeCode == code);
  }
  Frame frame;
  REQUIRE(DecodeSingleFrame({0x05, 0x03}, frame) == DecodeStatus::Ok);
  CHECK(frame.closeCode == CloseCode::ProtocolError);
  REQUIRE(DecodeSingleFrame({0x05, 0x40, 0x00}, frame) == DecodeStatus::Ok);  // 0, non-minimal
  CHECK(frame.closeCode == CloseCode::Graceful);
}

// ---- Checks on the outer layer ------------------------------------------------------------------

TEST_CASE("the header is checked for size, version, type and checksum in that order",
          "[rudp][wire]") {
  DecodedPacket packet;
  for (std::size_t size = 0; size < 1 + 8 + kChecksumSize; ++size) {
    Bytes tiny(size, 0x41);
    CHECK(Decode(tiny, packet) == DecodeStatus::TooShort);
  }
  CHECK(DecodePacket(nullptr, 0, packet) == DecodeStatus::TooShort);

  for (const std::uint8_t version : {0, 2, 15}) {
    Bytes body = DataHeader();
    body[0] = static_cast<std::uint8_t>((version << 4) | 4);
    CHECK(Decode(Seal(body), packet) == DecodeStatus::BadVersion);
  }
  for (std::uint8_t type = 12; type < 16; ++type) {
    Bytes body = DataHeader();
    body[0] = static_cast<std::uint8_t>((kProtocolVersion << 4) | type);
    CHECK(Decode(Seal(body), packet) == DecodeStatus::BadPacketType);
  }
  // A bad version wins over a bad checksum, which wins over a short Hello.
  Bytes wrongVersionAndCrc = Seal(DataHeader());
  wrongVersionAndCrc[0] = 0x24;
  wrongVersionAndCrc.back() ^= 1;
  CHECK(Decode(wrongVersionAndCrc, packet) == DecodeStatus::BadVersion);
  Bytes shortHello = Seal(Bytes(20, 0));
  shortHello[0] = (kProtocolVersion << 4) | 0;
  CHECK(Decode(shortHello, packet) == DecodeStatus::BadChecksum);
}

TEST_CASE("Hello and HelloWithCookie shorter than kHelloSize are rejected, longer accepted",
          "[rudp][wire]") {
  for (const std::uint8_t type : {0, 2}) {
    for (const std::size_t size : {std::size_t{13}, std::size_t{100}, kHelloSize - 1, kHelloSize,
                                   kHelloSize + 1, std::size_t{1500}}) {
      Bytes body(size - kChecksumSize, 0);
      body[0] = static_cast<std::uint8_t>((kProtocolVersion << 4) | type);
      if (body.size() > 9) body[9] = 0x42;  // source CID 0x42 << 56
      DecodedPacket packet;
      const DecodeStatus status = Decode(Seal(body), packet);
      INFO("type " << int{type} << " size " << size);
      if (size < kHelloSize) {
        CHECK(status == DecodeStatus::BadHelloSize);
      } else {
        REQUIRE(status == DecodeStatus::Ok);
        CHECK(packet.header.source == (std::uint64_t{0x42} << 56));
      }
    }
  }
}

TEST_CASE("PeekDestination reads bytes 1 to 8 without checking anything else", "[rudp][wire]") {
  Bytes datagram = {0xFF, 0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 1};
  ConnectionId id = 0;
  REQUIRE(PeekDestination(datagram.data(), datagram.size(), id));
  CHECK(id == 0xDEADBEEF00000001u);
  id = 7;
  CHECK_FALSE(PeekDestination(datagram.data(), 8, id));
  CHECK(id == 7);
  CHECK_FALSE(PeekDestination(nullptr, 0, id));
}

TEST_CASE("every single-bit flip of a valid datagram is rejected", "[rudp][wire]") {
  Writer w;
  w.writer.BeginData(0x0102030405060708u, 77);
  const std::uint8_t payload[40] = {1, 2, 3};
  const AckRange ranges[] = {{10, 20}, {1, 5}};
  std::size_t written = 0;
  REQUIRE(w.writer.AppendAck(ranges, 2, 100));
  REQUIRE(timerwheel::test::AppendStreamFrame(w.writer, 0, payload, sizeof(payload), &written));
  const Bytes original = w.Finish();
  DecodedPacket packet;
  REQUIRE(Decode(original, packet) == DecodeStatus::Ok);

  for (std::size_t byte = 0; byte < original.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes flipped = original;
      flipped[byte] ^= static_cast<std::uint8_t>(1u << bit);
      const DecodeStatus status = Decode(flipped, packet);
      INFO("byte " << byte << " bit " << bit);
      REQUIRE(status != DecodeStatus::Ok);
      // Flips in the first byte may be caught earlier, as a bad version or packet type.
      if (byte > 0) REQUIRE(status == DecodeStatus::BadChecksum);
    }
  }
}

// ---- Varints ------------------------------------------------------------------------------------

TEST_CASE("varints use the minimal size on both sides of every length boundary", "[rudp][wire]") {
  const std::pair<std::uint64_t, std::size_t> cases[] = {
      {0, 1},        {63, 1},        {64, 2}, {16383, 2}, {16384, 4}, {(1u << 30) - 1, 4},
      {1u << 30, 8}, {kMaxVarInt, 8}};
  for (const auto& [value, size] : cases) {
    INFO("value " << value);
    CHECK(VarIntSize(value) == size);
    Writer w;
    w.writer.BeginData(9, value);  // the packet number is a varint too
    CHECK(w.writer.FramesSize() == 0);
    REQUIRE(w.writer.AppendMaxData(value));
    CHECK(w.writer.FramesSize() == 1 + size);
    const Bytes datagram = w.Finish();
    CHECK(datagram.size() == 1 + 8 + size + 1 + size + kChecksumSize);
    // The two top bits of the first byte say the length.
    CHECK((datagram[9] >> 6) == (size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3));

    DecodedPacket packet;
    REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
    CHECK(packet.header.packetNumber == value);
    std::vector<Frame> frames;
    REQUIRE(ReadFrames(packet, frames) == DecodeStatus::Ok);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].maxData == value);
  }
}

TEST_CASE("non-minimal varint encodings are accepted", "[rudp][wire]") {
  const Bytes frames = {0x04, 0x05,                                              // 5 in 1 byte
                        0x04, 0x40, 0x05,                                        // 5 in 2 bytes
                        0x04, 0x80, 0x00, 0x00, 0x05,                            // 5 in 4 bytes
                        0x04, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,    // 5 in 8 bytes
                        0x04, 0x7F, 0xFF,                                        // 16383
                        0x04, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};   // 2^62 - 1
  Bytes body = {kDataTypeByte, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0x00, 0x00, 0x07};  // PN 7, 4 bytes
  body.insert(body.end(), frames.begin(), frames.end());
  DecodedPacket packet;
  const Bytes datagram = Seal(body);
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  CHECK(packet.header.packetNumber == 7);
  std::vector<Frame> decoded;
  REQUIRE(ReadFrames(packet, decoded) == DecodeStatus::Ok);
  REQUIRE(decoded.size() == 6);
  for (std::size_t i = 0; i < 4; ++i) CHECK(decoded[i].maxData == 5);
  CHECK(decoded[4].maxData == 16383);
  CHECK(decoded[5].maxData == kMaxVarInt);
}

// ---- Frames -------------------------------------------------------------------------------------

TEST_CASE("padding is skipped before, between and after frames", "[rudp][wire]") {
  DecodedPacket packet;
  const Bytes datagram = SealedData({0, 0, 0x01, 0, 0, 0, 0x04, 0x09, 0, 0});
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  FrameReader reader(packet.frames, packet.framesSize);
  Frame frame;
  REQUIRE(reader.Next(frame) == DecodeStatus::Ok);
  CHECK(frame.type == FrameType::Ping);
  REQUIRE(reader.Next(frame) == DecodeStatus::Ok);
  CHECK(frame.type == FrameType::MaxData);
  CHECK(frame.maxData == 9);
  CHECK(reader.AtEnd());
  CHECK(reader.Next(frame) == DecodeStatus::TooShort);

  const Bytes onlyPadding = SealedData({0, 0, 0, 0});
  REQUIRE(Decode(onlyPadding, packet) == DecodeStatus::Ok);
  CHECK(FrameReader(packet.frames, packet.framesSize).AtEnd());
  CHECK(FrameReader(nullptr, 0).AtEnd());
}

TEST_CASE("unknown frame types are BadFrame and the reader stays on them", "[rudp][wire]") {
  for (const std::uint8_t type : {0x06, 0x07, 0x1F, 0x40, 0x80, 0xFF}) {
    DecodedPacket packet;
    const Bytes datagram = SealedData({0x01, type, 0x01});
    REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
    FrameReader reader(packet.frames, packet.framesSize);
    Frame frame;
    REQUIRE(reader.Next(frame) == DecodeStatus::Ok);
    CHECK(reader.Next(frame) == DecodeStatus::BadFrame);
    CHECK_FALSE(reader.AtEnd());
    CHECK(reader.Next(frame) == DecodeStatus::BadFrame);
  }
}

TEST_CASE("stream frames must be non-empty, in range and complete", "[rudp][wire]") {
  Frame frame;
  CHECK(DecodeSingleFrame({0x03, 0x00, 0x00}, frame) == DecodeStatus::BadFrame);  // empty
  CHECK(DecodeSingleFrame({0x03, 0x00, 0x03, 'a', 'b'}, frame) == DecodeStatus::TooShort);
  CHECK(DecodeSingleFrame({0x03, 0x00}, frame) == DecodeStatus::TooShort);
  // offset 2^62 - 1 plus one byte passes kMaxVarInt.
  CHECK(DecodeSingleFrame({0x03, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 'a'},
                          frame) == DecodeStatus::BadFrame);
  // offset 2^62 - 2 plus one byte ends exactly at kMaxVarInt.
  REQUIRE(DecodeSingleFrame({0x03, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0x01, 'a'},
                            frame) == DecodeStatus::Ok);
  CHECK(frame.stream.offset == kMaxVarInt - 1);
  CHECK(frame.stream.length == 1);
  CHECK(frame.stream.data[0] == 'a');
}

// ---- ACK frames ---------------------------------------------------------------------------------

namespace {

// Descending, disjoint, non-adjacent ranges: [1000 - 10i - 3, 1000 - 10i] for i = 0..count-1.
std::vector<AckRange> MakeRanges(std::size_t count) {
  std::vector<AckRange> ranges;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t largest = 1000 - 10 * i;
    ranges.push_back({largest - 3, largest});
  }
  return ranges;
}

AckFrame RoundTripAck(const std::vector<AckRange>& ranges, std::size_t capacity,
                      std::size_t* framesSize = nullptr) {
  Writer w(capacity);
  w.writer.BeginData(1, 1);
  REQUIRE(w.writer.AppendAck(ranges.data(), ranges.size(), 250));
  if (framesSize != nullptr) *framesSize = w.writer.FramesSize();
  DecodedPacket packet;
  const Bytes datagram = w.Finish();
  REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
  std::vector<Frame> frames;
  REQUIRE(ReadFrames(packet, frames) == DecodeStatus::Ok);
  REQUIRE(frames.size() == 1);
  REQUIRE(frames[0].type == FrameType::Ack);
  return frames[0].ack;
}

void CheckPrefix(const AckFrame& ack, const std::vector<AckRange>& ranges, std::size_t count) {
  REQUIRE(ack.rangeCount == count);
  CHECK(ack.largest == ranges[0].largest);
  CHECK(ack.ackDelayMicroseconds == 250);
  for (std::size_t i = 0; i < count; ++i) {
    CHECK(ack.ranges[i].smallest == ranges[i].smallest);
    CHECK(ack.ranges[i].largest == ranges[i].largest);
  }
}

}  // namespace

TEST_CASE("ACK frames with 1, 2 and 32 ranges round-trip", "[rudp][wire][ack]") {
  for (const std::size_t count : {1, 2, 32}) {
    const std::vector<AckRange> ranges = MakeRanges(count);
    CheckPrefix(RoundTripAck(ranges, 1500), ranges, count);
  }
  // A single packet number and ranges one apart (gap 0) are the tightest cases.
  const std::vector<AckRange> tight = {{7, 7}, {3, 5}, {0, 1}};
  CheckPrefix(RoundTripAck(tight, 1500), tight, 3);
}

TEST_CASE("AppendAck writes at most kMaxAckRanges ranges", "[rudp][wire][ack]") {
  const std::vector<AckRange> ranges = MakeRanges(40);
  CheckPrefix(RoundTripAck(ranges, 1500), ranges, kMaxAckRanges);
}

TEST_CASE("AppendAck writes as many ranges as fit and fails if none do", "[rudp][wire][ack]") {
  const std::vector<AckRange> ranges = MakeRanges(10);
  // Type, largest (2), delay (2), count (1), first range (1) = 7; each more range is 2 bytes.
  const std::size_t header = 1 + 8 + 1;
  for (std::size_t room = 0; room < 40; ++room) {
    INFO("room " << room);
    const std::size_t capacity = header + room + kChecksumSize;
    Writer w(capacity);
    w.writer.BeginData(1, 1);
    REQUIRE(w.writer.Remaining() == room);
    if (room < 7) {
      CHECK_FALSE(w.writer.AppendAck(ranges.data(), ranges.size(), 250));
      CHECK(w.writer.FramesSize() == 0);
      continue;
    }
    const std::size_t expected = std::min<std::size_t>(10, 1 + (room - 7) / 2);
    std::size_t framesSize = 0;
    CheckPrefix(RoundTripAck(ranges, capacity, &framesSize), ranges, expected);
    CHECK(framesSize == 7 + 2 * (expected - 1));
  }
}

TEST_CASE("ACK ranges that underflow are BadFrame", "[rudp][wire][ack]") {
  Frame frame;
  // largest 5, delay 0, no more ranges, first range 6: smallest would be -1.
  CHECK(DecodeSingleFrame({0x02, 5, 0, 0, 6}, frame) == DecodeStatus::BadFrame);
  REQUIRE(DecodeSingleFrame({0x02, 5, 0, 0, 5}, frame) == DecodeStatus::Ok);
  CHECK(frame.ack.ranges[0].smallest == 0);
  // [10, 10], then gap 9: next largest would be 10 - 9 - 2 = -1.
  CHECK(DecodeSingleFrame({0x02, 10, 0, 1, 0, 9, 0}, frame) == DecodeStatus::BadFrame);
  // gap 8: next largest 0; a length of 1 would go below 0.
  CHECK(DecodeSingleFrame({0x02, 10, 0, 1, 0, 8, 1}, frame) == DecodeStatus::BadFrame);
  REQUIRE(DecodeSingleFrame({0x02, 10, 0, 1, 0, 8, 0}, frame) == DecodeStatus::Ok);
  REQUIRE(frame.ack.rangeCount == 2);
  CHECK(frame.ack.ranges[1].smallest == 0);
  CHECK(frame.ack.ranges[1].largest == 0);
  // [1, 1] leaves no room for another range at all.
  CHECK(DecodeSingleFrame({0x02, 1, 0, 1, 0, 0, 0}, frame) == DecodeStatus::BadFrame);
  // Huge gaps must not wrap around.
  CHECK(DecodeSingleFrame({0x02, 10, 0, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0},
                          frame) == DecodeStatus::BadFrame);
}

TEST_CASE("ACK frames with more than kMaxAckRanges ranges are BadFrame", "[rudp][wire][ack]") {
  // largest 1000 (2 bytes), then `additional` ranges of gap 0, length 0.
  const auto build = [](std::uint8_t additional) {
    Bytes frame = {0x02, 0x43, 0xE8, 0, additional, 0};
    for (std::uint8_t i = 0; i < additional; ++i) {
      frame.push_back(0);
      frame.push_back(0);
    }
    return frame;
  };
  Frame frame;
  REQUIRE(DecodeSingleFrame(build(kMaxAckRanges - 1), frame) == DecodeStatus::Ok);
  CHECK(frame.ack.rangeCount == kMaxAckRanges);
  CHECK(frame.ack.ranges[kMaxAckRanges - 1].largest == 1000 - 2 * (kMaxAckRanges - 1));
  CHECK(DecodeSingleFrame(build(kMaxAckRanges), frame) == DecodeStatus::BadFrame);
  CHECK(DecodeSingleFrame({0x02, 0x43, 0xE8, 0, 0x7F, 0xFF, 0}, frame) == DecodeStatus::BadFrame);
}

// ---- Truncation ---------------------------------------------------------------------------------

TEST_CASE("every truncation of a Data packet decodes safely to an error or fewer frames",
          "[rudp][wire]") {
  Writer w;
  w.writer.BeginData(0x0102030405060708u, 300);
  const std::uint8_t payload[70] = {9, 8, 7};
  const std::vector<AckRange> ranges = MakeRanges(5);
  std::size_t written = 0;
  REQUIRE(w.writer.AppendAck(ranges.data(), ranges.size(), 70000));
  REQUIRE(
      timerwheel::test::AppendStreamFrame(w.writer, 1 << 20, payload, sizeof(payload), &written));
  REQUIRE(w.writer.AppendMaxData(1ull << 40));
  REQUIRE(w.writer.AppendClose(CloseCode::Graceful));
  REQUIRE(w.writer.AppendPing());
  const Bytes full = w.Finish();
  const std::size_t allFrames = 5;

  for (std::size_t length = 0; length < full.size() - kChecksumSize; ++length) {
    INFO("length " << length);
    // Re-sealed so the checksum passes and the truncation reaches the frame decoder.
    const Bytes truncated =
        Seal(Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(length)));
    std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[truncated.size()]);
    std::memcpy(exact.get(), truncated.data(), truncated.size());
    DecodedPacket packet;
    const DecodeStatus status = DecodePacket(exact.get(), truncated.size(), packet);
    if (status != DecodeStatus::Ok) continue;
    REQUIRE(packet.frames + packet.framesSize == exact.get() + length);
    FrameReader reader(packet.frames, packet.framesSize);
    std::size_t decoded = 0;
    DecodeStatus frameStatus = DecodeStatus::Ok;
    while (!reader.AtEnd()) {
      Frame frame;
      frameStatus = reader.Next(frame);
      if (frameStatus != DecodeStatus::Ok) break;
      if (frame.type == FrameType::Stream) {
        REQUIRE(frame.stream.data + frame.stream.length <= exact.get() + length);
      }
      ++decoded;
    }
    CHECK((frameStatus != DecodeStatus::Ok || decoded < allFrames));
  }
}

// ---- Writer bookkeeping -------------------------------------------------------------------------

TEST_CASE("Remaining and FramesSize track every append", "[rudp][wire]") {
  Writer w(100);
  w.writer.BeginData(1, 64);  // 2-byte packet number: 11-byte header
  CHECK(w.writer.Remaining() == 100 - 11 - kChecksumSize);
  CHECK(w.writer.FramesSize() == 0);
  REQUIRE(w.writer.AppendPing());
  CHECK(w.writer.Remaining() == 100 - 11 - kChecksumSize - 1);
  CHECK(w.writer.FramesSize() == 1);
  REQUIRE(w.writer.AppendMaxData(64));
  CHECK(w.writer.FramesSize() == 4);
  REQUIRE(w.writer.AppendClose(CloseCode::Graceful));
  CHECK(w.writer.FramesSize() == 6);
  CHECK(w.writer.Remaining() == 100 - 11 - kChecksumSize - 6);
  CHECK(w.writer.Finish() == 11 + 6 + kChecksumSize);

  // Filling to the last byte, then every append fails and changes nothing.
  Writer full(11 + 2 + kChecksumSize);
  full.writer.BeginData(1, 64);
  REQUIRE(full.writer.Remaining() == 2);
  CHECK_FALSE(full.writer.AppendMaxData(64));
  REQUIRE(full.writer.AppendMaxData(63));
  CHECK(full.writer.Remaining() == 0);
  const std::uint8_t byte = 1;
  std::size_t written = 99;
  CHECK_FALSE(full.writer.AppendPing());
  CHECK_FALSE(full.writer.AppendClose(CloseCode::Graceful));
  CHECK_FALSE(timerwheel::test::AppendStreamFrame(full.writer, 0, &byte, 1, &written));
  CHECK(written == 0);
  CHECK(full.writer.FramesSize() == 2);
  CHECK(full.writer.Finish() == full.buffer.size());
}

TEST_CASE("AppendStream writes the longest prefix that fits", "[rudp][wire]") {
  std::vector<std::uint8_t> data(20000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7);
  const std::size_t header = 1 + 8 + 1;
  // room: frame space; expected: bytes written with offset 0 (type + 1-byte offset = 2 bytes).
  const std::pair<std::size_t, std::size_t> cases[] = {
      {3, 0},    {4, 1},         {50, 47},       {66, 63},       {67, 63},      {68, 64},
      {102, 98}, {16387, 16383}, {16388, 16383}, {16389, 16383}, {16390, 16384}};
  for (const auto& [room, expected] : cases) {
    INFO("room " << room);
    Writer w(header + room + kChecksumSize);
    w.writer.BeginData(1, 1);
    REQUIRE(w.writer.Remaining() == room);
    std::size_t written = 12345;
    const bool ok =
        timerwheel::test::AppendStreamFrame(w.writer, 0, data.data(), data.size(), &written);
    CHECK(ok == (expected > 0));
    CHECK(written == expected);
    if (!ok) {
      CHECK(w.writer.FramesSize() == 0);
      continue;
    }
    CHECK(w.writer.FramesSize() == 2 + VarIntSize(expected) + expected);
    DecodedPacket packet;
    const Bytes datagram = w.Finish();
    REQUIRE(Decode(datagram, packet) == DecodeStatus::Ok);
    std::vector<Frame> frames;
    REQUIRE(ReadFrames(packet, frames) == DecodeStatus::Ok);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].stream.offset == 0);
    REQUIRE(frames[0].stream.length == expected);
    CHECK(std::memcmp(frames[0].stream.data, data.data(), expected) == 0);
  }

  Writer w;
  w.writer.BeginData(1, 1);
  std::size_t written = 5;
  CHECK_FALSE(timerwheel::test::AppendStreamFrame(w.writer, 0, data.data(), 0,
                                                  &written));  // nothing to send
  CHECK(written == 0);
  // At the top of the offset space only kMaxVarInt - offset bytes may follow.
  REQUIRE(timerwheel::test::AppendStreamFrame(w.writer, kMaxVarInt - 2, data.data(), 10, &written));
  CHECK(written == 2);
  CHECK_FALSE(timerwheel::test::AppendStreamFrame(w.writer, kMaxVarInt, data.data(), 10, &written));
}

TEST_CASE("a writer whose capacity cannot hold the header produces nothing", "[rudp][wire]") {
  Writer hello(kHelloSize - 1);
  hello.writer.BeginHello(1);
  CHECK(hello.writer.Remaining() == 0);
  CHECK(hello.writer.Finish() == 0);

  Writer data(1 + 8 + 1 + kChecksumSize - 1);
  data.writer.BeginData(1, 1);
  CHECK_FALSE(data.writer.AppendPing());
  CHECK(data.writer.Finish() == 0);

  // The same writer can be reused for a packet that fits.
  Writer reused(64);
  reused.writer.BeginHello(1);
  CHECK(reused.writer.Finish() == 0);
  reused.writer.BeginData(1, 1);
  CHECK(reused.writer.Finish() == 1 + 8 + 1 + kChecksumSize);
}

TEST_CASE("ToString names every decode status", "[rudp][wire]") {
  CHECK(std::string(ToString(DecodeStatus::Ok)) == "Ok");
  CHECK(std::string(ToString(DecodeStatus::BadChecksum)) == "BadChecksum");
  CHECK(std::string(ToString(DecodeStatus::BadHelloSize)) == "BadHelloSize");
}

// ---- CRC-32C ------------------------------------------------------------------------------------

TEST_CASE("CRC-32C matches the check value and the bitwise definition", "[rudp][crc]") {
  const std::uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  CHECK(Crc32c(check, sizeof(check)) == 0xE3069283u);
  CHECK(ReferenceCrc32c(check, sizeof(check)) == 0xE3069283u);
  CHECK(Crc32c(nullptr, 0) == 0);
  // RFC 3720 B.4: 32 bytes of zeros and of 0xFF.
  const std::vector<std::uint8_t> zeros(32, 0x00);
  const std::vector<std::uint8_t> ones(32, 0xFF);
  CHECK(Crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
  CHECK(Crc32c(ones.data(), ones.size()) == 0x62A8AB43u);

  std::mt19937 random(12345);
  std::vector<std::uint8_t> buffer(600);
  for (auto& byte : buffer) byte = static_cast<std::uint8_t>(random());
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t size = 0; size + offset <= 520; ++size) {
      INFO("offset " << offset << " size " << size);
      const std::uint32_t expected = ReferenceCrc32c(buffer.data() + offset, size);
      REQUIRE(Crc32c(buffer.data() + offset, size) == expected);
      REQUIRE(Crc32cWithTables(buffer.data() + offset, size) == expected);
    }
  }
}

TEST_CASE("CRC-32C from the tables and from the processor's instruction agree", "[rudp][crc]") {
  // On x86-64 with SSE4.2 Crc32c takes the instruction; the tables are what other processors
  // run. Both must chain and give the check values.
  INFO("Crc32c uses the CRC32 instruction: " << Crc32cUsesInstruction());
  const std::uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  CHECK(Crc32cWithTables(check, sizeof(check)) == 0xE3069283u);
  std::mt19937 random(7);
  std::vector<std::uint8_t> buffer(1500);
  for (auto& byte : buffer) byte = static_cast<std::uint8_t>(random());
  for (int trial = 0; trial < 500; ++trial) {
    const std::size_t offset = random() % 16;
    const std::size_t size = random() % (buffer.size() - offset + 1);
    const std::uint32_t seed = static_cast<std::uint32_t>(random());
    INFO("offset " << offset << " size " << size << " seed " << seed);
    REQUIRE(Crc32c(buffer.data() + offset, size, seed) ==
            Crc32cWithTables(buffer.data() + offset, size, seed));
  }
}

TEST_CASE("CRC-32C chains over input split anywhere", "[rudp][crc]") {
  const std::uint8_t check[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  for (std::size_t split = 0; split <= sizeof(check); ++split) {
    CHECK(Crc32c(check + split, sizeof(check) - split, Crc32c(check, split)) == 0xE3069283u);
  }
  std::mt19937 random(99);
  std::vector<std::uint8_t> buffer(2000);
  for (auto& byte : buffer) byte = static_cast<std::uint8_t>(random());
  const std::uint32_t whole = Crc32c(buffer.data(), buffer.size());
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t a = random() % buffer.size();
    const std::size_t b = a + random() % (buffer.size() - a + 1);
    std::uint32_t crc = Crc32c(buffer.data(), a);
    crc = Crc32c(buffer.data() + a, b - a, crc);
    crc = Crc32c(buffer.data() + b, buffer.size() - b, crc);
    REQUIRE(crc == whole);
  }
}

// ---- Encrypted packets (issue 20) ---------------------------------------------------------------

namespace {

// Seals with a fixed key, as a connection would.
class TestSealer final : public IPacketSealer {
 public:
  explicit TestSealer(PacketNumber number) : m_number(number) {}
  void Seal(std::uint8_t* packet, std::size_t authenticatedSize,
            std::size_t plaintextSize) noexcept override {
    m_protection.Seal(m_number, packet, authenticatedSize, plaintextSize);
  }
  const PacketProtection& Protection() const { return m_protection; }

 private:
  PacketNumber m_number;
  PacketProtection m_protection{AeadAlgorithm::ChaCha20Poly1305, PacketKey{}};
};

}  // namespace

TEST_CASE("SecureData: header in clear, frames sealed, tag in place of the checksum",
          "[rudp][wire][crypto]") {
  Bytes buffer(200);
  TestSealer sealer(37);
  PacketWriter writer(buffer.data(), buffer.size());
  writer.BeginSecureData(0x0102030405060708u, 37, true, sealer);
  REQUIRE(writer.AppendPing());
  REQUIRE(writer.AppendClose(CloseCode::Graceful));
  writer.PadTo(kMinDataPacketSize);
  const std::size_t size = writer.Finish();
  CHECK(size == kMinDataPacketSize);
  buffer.resize(size);
  CHECK(buffer[0] == ((kProtocolVersion << 4) | 10));  // SecureDataPhase1

  DecodedPacket packet;
  REQUIRE(DecodePacket(buffer.data(), buffer.size(), packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::SecureDataPhase1);
  CHECK(packet.header.keyPhase);
  CHECK(packet.header.destination == 0x0102030405060708u);
  CHECK(packet.header.packetNumber == 37);  // a one-byte varint: the header is 10 bytes
  CHECK(packet.authenticatedSize == 10);
  CHECK(packet.frames == buffer.data() + 10);
  CHECK(packet.framesSize == size - 10);

  std::size_t plaintextSize = 0;
  REQUIRE(
      sealer.Protection().Open(37, buffer.data(), packet.authenticatedSize, size, plaintextSize));
  FrameReader reader(buffer.data() + 10, plaintextSize);
  Frame frame;
  REQUIRE(reader.Next(frame) == DecodeStatus::Ok);
  CHECK(frame.type == FrameType::Ping);
  REQUIRE(reader.Next(frame) == DecodeStatus::Ok);
  CHECK(frame.type == FrameType::Close);
  CHECK(reader.AtEnd());

  // Shorter than a tag after the header: TooShort, not a packet with no frames.
  Bytes truncated(buffer.begin(), buffer.begin() + 10 + kAeadTagSize - 1);
  CHECK(DecodePacket(truncated.data(), truncated.size(), packet) == DecodeStatus::TooShort);
}

TEST_CASE("SecureHelloWithCookie and SecureWelcome carry the handshake payload sealed",
          "[rudp][wire][crypto]") {
  const TransportParameters parameters = SampleParameters();
  ResetToken token{};
  token[0] = 0xAB;
  X25519Key ephemeral{};
  ephemeral[31] = 0x42;
  std::array<std::uint8_t, kCookieSize> cookie{};
  cookie[5] = 9;

  Bytes hello(kHelloSize);
  TestSealer sealer(0);
  PacketWriter writer(hello.data(), hello.size());
  writer.BeginSecureHelloWithCookie(0x1111u, cookie, ephemeral, parameters, token, 1, sealer);
  REQUIRE(writer.Finish() == kHelloSize);
  DecodedPacket packet;
  REQUIRE(DecodePacket(hello.data(), hello.size(), packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::SecureHelloWithCookie);
  CHECK(packet.header.source == 0x1111u);
  CHECK(packet.header.cookie == cookie);
  CHECK(packet.header.ephemeral == ephemeral);
  CHECK(packet.authenticatedSize == 75);
  std::size_t plaintextSize = 0;
  REQUIRE(sealer.Protection().Open(0, hello.data(), packet.authenticatedSize,
                                   packet.authenticatedSize + packet.framesSize, plaintextSize));
  TransportParameters decoded;
  ResetToken decodedToken{};
  std::uint8_t flags = 0;
  REQUIRE(DecodeHandshakePayload(hello.data() + 75, plaintextSize, decoded, decodedToken, flags));
  CHECK(decoded.idleTimeoutMs == 30'000);
  CHECK(decodedToken == token);
  CHECK(flags == 1);
  // One padding byte fewer, with a valid checksum: under the Hello size.
  const Bytes shortHello = Seal(Bytes(hello.begin(), hello.end() - kChecksumSize - 1));
  CHECK(DecodePacket(shortHello.data(), shortHello.size(), packet) == DecodeStatus::BadHelloSize);

  Bytes welcome(kHelloSize);
  PacketWriter welcomeWriter(welcome.data(), welcome.size());
  welcomeWriter.BeginSecureWelcome(0x1111u, 0x2222u, ephemeral, parameters, token, 0, sealer);
  const std::size_t size = welcomeWriter.Finish();
  CHECK(size < 130);  // far smaller than the 1200-byte datagram it answers
  welcome.resize(size);
  REQUIRE(DecodePacket(welcome.data(), welcome.size(), packet) == DecodeStatus::Ok);
  CHECK(packet.header.type == PacketType::SecureWelcome);
  CHECK(packet.header.destination == 0x1111u);
  CHECK(packet.header.source == 0x2222u);
  CHECK(packet.authenticatedSize == 49);
  CHECK(sealer.Protection().Open(0, welcome.data(), 49, 49 + packet.framesSize, plaintextSize));

  Bytes refusal(64);
  PacketWriter refusalWriter(refusal.data(), refusal.size());
  refusalWriter.BeginAuthRefusal(0x1111u);
  CHECK(refusalWriter.Finish() == kRefusalPacketSize);
}

TEST_CASE("a SecureHelloWithCookie carries the client token sealed after the flags",
          "[rudp][wire][crypto]") {
  const TransportParameters parameters = SampleParameters();
  const X25519Key ephemeral{};
  const std::array<std::uint8_t, kCookieSize> cookie{};
  TestSealer sealer(0);
  // The plaintext of a hello with `clientToken`, opened; its size in *plaintextSize.
  auto sealedPayload = [&](const Bytes& clientToken, std::size_t& plaintextSize) {
    Bytes hello(kHelloSize);
    PacketWriter writer(hello.data(), hello.size());
    writer.BeginSecureHelloWithCookie(0x1111u, cookie, ephemeral, parameters, ResetToken{}, 0,
                                      sealer, clientToken.data(), clientToken.size());
    REQUIRE(writer.Finish() == kHelloSize);
    DecodedPacket packet;
    REQUIRE(DecodePacket(hello.data(), hello.size(), packet) == DecodeStatus::Ok);
    REQUIRE(sealer.Protection().Open(0, hello.data(), packet.authenticatedSize,
                                     packet.authenticatedSize + packet.framesSize, plaintextSize));
    return Bytes(hello.begin() + static_cast<std::ptrdiff_t>(packet.authenticatedSize),
                 hello.begin() + static_cast<std::ptrdiff_t>(packet.authenticatedSize) +
                     static_cast<std::ptrdiff_t>(plaintextSize));
  };
  TransportParameters decoded;
  ResetToken resetToken{};
  std::uint8_t flags = 0;
  const std::uint8_t* token = nullptr;
  std::size_t tokenSize = 99;

  std::size_t plaintextSize = 0;
  const Bytes largest(kMaxClientTokenSize, 0x7E);
  const Bytes withToken = sealedPayload(largest, plaintextSize);
  REQUIRE(DecodeHandshakePayload(withToken.data(), withToken.size(), decoded, resetToken, flags,
                                 &token, &tokenSize));
  REQUIRE(tokenSize == kMaxClientTokenSize);
  CHECK(Bytes(token, token + tokenSize) == largest);
  // Ignored by a reader that does not ask for it (the server of before, and SecureWelcome).
  CHECK(DecodeHandshakePayload(withToken.data(), withToken.size(), decoded, resetToken, flags));
  // A length beyond the plaintext, or over the limit: malformed.
  CHECK_FALSE(DecodeHandshakePayload(withToken.data(), withToken.size() - 1, decoded, resetToken,
                                     flags, &token, &tokenSize));
  Bytes tooLong = withToken;
  tooLong.push_back(0);
  const std::size_t lengthAt = withToken.size() - kMaxClientTokenSize - 2;
  tooLong[lengthAt] = static_cast<std::uint8_t>((kMaxClientTokenSize + 1) >> 8);
  tooLong[lengthAt + 1] = static_cast<std::uint8_t>(kMaxClientTokenSize + 1);
  CHECK_FALSE(DecodeHandshakePayload(tooLong.data(), tooLong.size(), decoded, resetToken, flags,
                                     &token, &tokenSize));

  // No token: the payload is exactly what it was before tokens (nothing after the flags).
  const Bytes without = sealedPayload({}, plaintextSize);
  CHECK(without.size() == withToken.size() - 2 - kMaxClientTokenSize);
  REQUIRE(DecodeHandshakePayload(without.data(), without.size(), decoded, resetToken, flags, &token,
                                 &tokenSize));
  CHECK(tokenSize == 0);
  CHECK(token == nullptr);
}
