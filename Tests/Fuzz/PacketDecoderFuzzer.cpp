// libFuzzer target: ReliableUDP's wire format (ReliableUDP/Detail/WireFormat.h).
//
// Each input is one datagram. DecodePacket must never crash, read outside it or loop; for a Data
// packet every frame is walked with FrameReader until AtEnd() or an error. Whatever decoded is
// then encoded again with PacketWriter (header and the frames read before any error) and decoded
// a second time: the second decode must give the same header and the same frames, and a third
// encode must give the same bytes as the second (the writer's output is a fixed point). The
// frames are also written into a buffer too small for them: each Append writes all or nothing
// (a STREAM frame may be cut, an ACK may lose its oldest ranges), and what was written decodes to
// what was appended. Any difference aborts.
//
// The checksum trick: a random datagram almost never carries a valid CRC-32C, and then decoding
// stops at BadChecksum. So if the input's first byte is odd, it is only a flag: the datagram is
// input[1..] followed by the CRC-32C of input[1..] (big-endian, as on the wire), which gets the
// fuzzer past the checksum to the type-specific decoding. With an even first byte the input is
// the datagram exactly as given (a Hello or Data type byte, 0x10 or 0x14, is even), so the
// checksum check itself is fuzzed too. Seeds: Tests/Fuzz/corpus/PacketDecoderFuzzer/.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "FuzzInput.h"
#include "ReliableUDP/Detail/Crc32c.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/Support/FrameWriting.h"

using namespace timerwheel::rudp::detail;
using timerwheel::fuzz::Check;

namespace {

// The frames FrameReader returned before it stopped, and how it stopped.
struct WalkedFrames {
  std::vector<Frame> frames;
  DecodeStatus end = DecodeStatus::Ok;  // Ok: AtEnd(); else the error that stopped the walk
};

WalkedFrames WalkFrames(const std::uint8_t* data, std::size_t size) {
  WalkedFrames walked;
  FrameReader reader(data, size);
  // Every frame but Padding (skipped, never returned) takes at least one byte.
  std::size_t guard = 0;
  while (!reader.AtEnd()) {
    Check(++guard <= size, "FrameReader returned more frames than there are bytes");
    Frame frame;
    const DecodeStatus status = reader.Next(frame);
    if (status != DecodeStatus::Ok) {
      Check(status == DecodeStatus::TooShort || status == DecodeStatus::BadFrame,
            "FrameReader::Next returned a status that is not a frame error");
      Frame again;
      Check(reader.Next(again) == status, "FrameReader::Next did not repeat its error");
      Check(!reader.AtEnd(), "FrameReader reached its end after an error");
      walked.end = status;
      return walked;
    }
    Check(frame.type != FrameType::Padding, "FrameReader returned a Padding frame");
    switch (frame.type) {
      case FrameType::Ack: {
        const AckFrame& ack = frame.ack;
        Check(ack.rangeCount >= 1 && ack.rangeCount <= kMaxAckRanges, "ACK range count");
        Check(ack.ranges[0].largest == ack.largest, "ACK first range does not end at largest");
        for (std::size_t i = 0; i < ack.rangeCount; ++i) {
          Check(ack.ranges[i].smallest <= ack.ranges[i].largest, "ACK range upside down");
          Check(ack.ranges[i].largest <= kMaxVarInt, "ACK range above kMaxVarInt");
          if (i > 0) {
            Check(ack.ranges[i].largest + 2 <= ack.ranges[i - 1].smallest,
                  "ACK ranges not descending with a gap");
          }
        }
        break;
      }
      case FrameType::Stream: {
        const StreamFrame& stream = frame.stream;
        Check(stream.length >= 1, "empty STREAM frame");
        Check(stream.offset <= kMaxVarInt && stream.length <= kMaxVarInt - stream.offset,
              "STREAM frame ends beyond kMaxVarInt");
        Check(stream.data >= data && stream.data + stream.length <= data + size,
              "STREAM data outside the frames");
        break;
      }
      case FrameType::MaxData:
        Check(frame.maxData <= kMaxVarInt, "MAX_DATA above kMaxVarInt");
        break;
      case FrameType::Close:
        Check(frame.closeCode == CloseCode::Graceful || frame.closeCode == CloseCode::Aborted ||
                  frame.closeCode == CloseCode::ProtocolError,
              "CLOSE code out of range");
        break;
      default:
        break;
    }
    walked.frames.push_back(frame);
  }
  Frame past;
  Check(reader.Next(past) == DecodeStatus::TooShort,
        "FrameReader::Next at the end is not TooShort");
  return walked;
}

// Encodes the decoded packet again. For Data, only the frames that were read.
// `capacity`: the original datagram's size is always enough (the writer's encoding is never longer
// than any other, and Hello padding is at most kHelloSize).
std::vector<std::uint8_t> Encode(const PacketHeader& header, const std::vector<Frame>& frames,
                                 std::size_t capacity) {
  std::vector<std::uint8_t> buffer(std::max(capacity, kHelloSize));
  PacketWriter writer(buffer.data(), buffer.size());
  switch (header.type) {
    case PacketType::Hello:
      writer.BeginHello(header.source);
      break;
    case PacketType::Cookie:
      writer.BeginCookie(header.destination, header.cookie);
      break;
    case PacketType::HelloWithCookie:
      writer.BeginHelloWithCookie(header.source, header.cookie, header.parameters,
                                  header.resetToken);
      break;
    case PacketType::Welcome:
      writer.BeginWelcome(header.destination, header.source, header.parameters, header.resetToken);
      break;
    case PacketType::Refusal:
      writer.BeginRefusal(header.destination);
      break;
    case PacketType::Reset:
      writer.BeginReset(header.destination, header.resetToken);
      break;
    case PacketType::Data:
      writer.BeginData(header.destination, header.packetNumber);
      for (const Frame& frame : frames) {
        std::size_t written = 0;
        const bool appended = timerwheel::test::AppendFrame(writer, frame, &written);
        Check(frame.type != FrameType::Stream || written == frame.stream.length,
              "AppendStreamFrame wrote only part of a frame");
        Check(appended, "PacketWriter refused a frame that was just decoded");
      }
      break;
    case PacketType::SecureHelloWithCookie:
    case PacketType::SecureWelcome:
    case PacketType::SecureData:
    case PacketType::SecureDataPhase1:
    case PacketType::AuthRefusal:
      Check(false, "Encode called for a packet whose sealed part only its keys can rebuild");
      break;
  }
  const std::size_t size = writer.Finish();
  Check(size > 0, "PacketWriter::Finish failed on a decoded header");
  buffer.resize(size);
  return buffer;
}

// Hello and HelloWithCookie have destination 0 on the wire, but DecodePacket does not insist (it
// reads bytes 1..8 of every packet, and the endpoint routes these two by type, not by
// destination); PacketWriter writes 0, so for them the destination is not compared.
bool SameHeader(const PacketHeader& a, const PacketHeader& b) {
  const bool hasDestination = a.type != PacketType::Hello && a.type != PacketType::HelloWithCookie;
  return a.type == b.type && (!hasDestination || a.destination == b.destination) &&
         a.source == b.source && a.cookie == b.cookie &&
         a.parameters.maxAckDelayMs == b.parameters.maxAckDelayMs &&
         a.parameters.initialMaxData == b.parameters.initialMaxData &&
         a.parameters.maxDatagramSize == b.parameters.maxDatagramSize &&
         a.parameters.idleTimeoutMs == b.parameters.idleTimeoutMs &&
         a.parameters.maxMessageSize == b.parameters.maxMessageSize &&
         a.resetToken == b.resetToken && a.packetNumber == b.packetNumber;
}

bool SameFrame(const Frame& a, const Frame& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case FrameType::Ack:
      if (a.ack.largest != b.ack.largest || a.ack.rangeCount != b.ack.rangeCount ||
          a.ack.ackDelayMicroseconds != b.ack.ackDelayMicroseconds) {
        return false;
      }
      for (std::size_t i = 0; i < a.ack.rangeCount; ++i) {
        if (a.ack.ranges[i].smallest != b.ack.ranges[i].smallest ||
            a.ack.ranges[i].largest != b.ack.ranges[i].largest) {
          return false;
        }
      }
      return true;
    case FrameType::Stream:
      return a.stream.offset == b.stream.offset && a.stream.length == b.stream.length &&
             std::memcmp(a.stream.data, b.stream.data, a.stream.length) == 0;
    case FrameType::MaxData:
      return a.maxData == b.maxData;
    case FrameType::Close:
      return a.closeCode == b.closeCode;
    default:
      return true;
  }
}

// Decodes a datagram that must decode; returns its frames (all of them must decode too).
WalkedFrames DecodeMustSucceed(const std::vector<std::uint8_t>& datagram, DecodedPacket& packet) {
  Check(DecodePacket(datagram.data(), datagram.size(), packet) == DecodeStatus::Ok,
        "a datagram PacketWriter wrote does not decode");
  if (packet.header.type != PacketType::Data) return {};
  WalkedFrames walked = WalkFrames(packet.frames, packet.framesSize);
  Check(walked.end == DecodeStatus::Ok, "a frame PacketWriter wrote does not decode");
  return walked;
}

// PacketWriter with too little room: the frames of a Data packet written into `capacity` bytes.
// Each Append must either write its whole frame or nothing and return false, except a STREAM
// frame, which may be cut to a prefix of at least one byte; what was written must decode to
// exactly the frames appended (the cut one as its prefix), and fit in the capacity.
void EncodeWithLittleRoom(const PacketHeader& header, const std::vector<Frame>& frames,
                          std::size_t capacity) {
  std::vector<std::uint8_t> buffer(capacity);
  PacketWriter writer(buffer.data(), buffer.size());
  writer.BeginData(header.destination, header.packetNumber);
  std::vector<Frame> appended;
  std::size_t framesSize = writer.FramesSize();
  Check(framesSize == 0, "FramesSize is not 0 after BeginData");
  for (const Frame& frame : frames) {
    const std::size_t room = writer.Remaining();
    Frame written = frame;
    std::size_t count = 0;
    const bool ok = timerwheel::test::AppendFrame(writer, frame, &count);
    if (frame.type == FrameType::Stream) {
      Check(ok == (count > 0) && count <= frame.stream.length,
            "AppendStreamFrame's result and its count disagree");
      written.stream.length = count;
    }
    const std::size_t grown = writer.FramesSize() - framesSize;
    if (!ok) {
      Check(grown == 0 && writer.Remaining() == room, "a refused Append wrote something");
      break;
    }
    Check(grown > 0 && grown <= room && writer.Remaining() == room - grown,
          "Remaining and FramesSize do not add up after an Append");
    framesSize += grown;
    appended.push_back(written);  // an ACK may lose its oldest ranges: compared below
    if (frame.type == FrameType::Stream && written.stream.length < frame.stream.length) break;
  }
  const std::size_t size = writer.Finish();
  if (size == 0) {
    Check(capacity < 1 + 8 + VarIntSize(header.packetNumber) + 4,
          "PacketWriter::Finish failed with room for the header");
    return;
  }
  Check(size <= capacity, "PacketWriter wrote past its capacity");
  buffer.resize(size);
  DecodedPacket packet;
  Check(DecodePacket(buffer.data(), buffer.size(), packet) == DecodeStatus::Ok,
        "a datagram written with little room does not decode");
  const WalkedFrames walked = WalkFrames(packet.frames, packet.framesSize);
  Check(walked.end == DecodeStatus::Ok, "a frame written with little room does not decode");
  Check(walked.frames.size() == appended.size(), "frames written with little room went missing");
  for (std::size_t i = 0; i < appended.size(); ++i) {
    const Frame& expected = appended[i];
    const Frame& got = walked.frames[i];
    if (expected.type == FrameType::Ack) {
      const Frame& original = frames[i];
      Check(got.type == FrameType::Ack && got.ack.rangeCount >= 1 &&
                got.ack.rangeCount <= original.ack.rangeCount &&
                got.ack.ackDelayMicroseconds == original.ack.ackDelayMicroseconds,
            "an ACK written with little room changed");
      for (std::size_t r = 0; r < got.ack.rangeCount; ++r) {
        Check(got.ack.ranges[r].smallest == original.ack.ranges[r].smallest &&
                  got.ack.ranges[r].largest == original.ack.ranges[r].largest,
              "an ACK written with little room lost or changed a newer range");
      }
    } else {
      Check(SameFrame(expected, got), "a frame written with little room changed");
    }
  }
}

void FuzzDatagram(const std::uint8_t* datagram, std::size_t size) {
  ConnectionId peeked = 0;
  const bool canPeek = PeekDestination(datagram, size, peeked);
  Check(canPeek == (size >= 9), "PeekDestination and the datagram's size disagree");

  DecodedPacket packet;
  const DecodeStatus status = DecodePacket(datagram, size, packet);
  if (status != DecodeStatus::Ok) return;
  const PacketHeader& header = packet.header;
  Check(size >= 13, "a datagram under 13 bytes decoded");
  Check(peeked == header.destination, "PeekDestination differs from the decoded destination");
  if (header.type == PacketType::Hello || header.type == PacketType::HelloWithCookie) {
    Check(size >= kHelloSize, "a short Hello decoded");
  }

  // The encrypted types: the decoder only frames the sealed part (its contents are the keys'
  // business; ConnectionFuzzer runs the engine on them); it must lie inside the datagram.
  if (header.type == PacketType::SecureHelloWithCookie ||
      header.type == PacketType::SecureWelcome || IsSecureData(header.type)) {
    Check(packet.framesSize >= kAeadTagSize, "a sealed part shorter than its tag decoded");
    Check(packet.frames == datagram + packet.authenticatedSize &&
              packet.authenticatedSize + packet.framesSize <= size,
          "the sealed part lies outside the datagram");
    if (header.type == PacketType::SecureHelloWithCookie) {
      Check(size >= kHelloSize, "a short SecureHelloWithCookie decoded");
    }
    return;
  }
  if (header.type == PacketType::AuthRefusal) return;

  WalkedFrames walked;
  if (header.type == PacketType::Data) {
    Check(packet.frames >= datagram + 9 && packet.frames + packet.framesSize <= datagram + size - 4,
          "frames outside the datagram");
    Check(header.packetNumber <= kMaxVarInt, "packet number above kMaxVarInt");
    walked = WalkFrames(packet.frames, packet.framesSize);
  } else {
    Check(packet.frames == nullptr && packet.framesSize == 0, "frames in a handshake packet");
  }

  // Round trip: encode what decoded, decode it again, compare; then encode once more.
  const std::vector<std::uint8_t> first = Encode(header, walked.frames, size);
  Check(first.size() <= std::max(size, kHelloSize), "the re-encoded datagram grew");
  DecodedPacket again;
  const WalkedFrames walkedAgain = DecodeMustSucceed(first, again);
  Check(SameHeader(header, again.header), "the header changed in an encode/decode round trip");
  Check(walkedAgain.frames.size() == walked.frames.size(),
        "the number of frames changed in an encode/decode round trip");
  for (std::size_t i = 0; i < walked.frames.size(); ++i) {
    Check(SameFrame(walked.frames[i], walkedAgain.frames[i]),
          "a frame changed in an encode/decode round trip");
  }
  const std::vector<std::uint8_t> second = Encode(again.header, walkedAgain.frames, first.size());
  Check(first == second, "encoding is not a fixed point: encode(decode(encode(x))) != encode(x)");

  // The same frames with less room than they need (how much less: from the checksum's last byte).
  if (header.type == PacketType::Data && !walked.frames.empty()) {
    const std::size_t less = 1 + datagram[size - 1] % 64u;
    EncodeWithLittleRoom(header, walked.frames, first.size() > less ? first.size() - less : 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 0 && (data[0] & 1) != 0) {
    // Checksum trick (see the top of the file): input[1..] + its CRC-32C.
    std::vector<std::uint8_t> datagram(data + 1, data + size);
    const std::uint32_t crc = Crc32c(datagram.data(), datagram.size());
    for (int shift = 24; shift >= 0; shift -= 8) {
      datagram.push_back(static_cast<std::uint8_t>(crc >> shift));
    }
    FuzzDatagram(datagram.data(), datagram.size());
  } else {
    // The bytes exactly as given; a copy of exactly `size` bytes, so that AddressSanitizer sees
    // any read past the end (libFuzzer's own buffer is exact too, but keep it explicit).
    std::vector<std::uint8_t> datagram(data, data + size);
    FuzzDatagram(datagram.empty() ? nullptr : datagram.data(), datagram.size());
  }
  return 0;
}
