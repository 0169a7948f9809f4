// Encoding and decoding of ReliableUDP datagrams; the byte layout is in
// docs/reliable-udp-wire-format.md.
#include "ReliableUDP/Detail/WireFormat.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ReliableUDP/Detail/Crc32c.h"

namespace timerwheel::rudp::detail {
namespace {

constexpr std::size_t kConnectionIdSize = 8;
// Type byte and destination connection ID: what every packet starts with.
constexpr std::size_t kCommonHeaderSize = 1 + kConnectionIdSize;
// ... and a source connection ID after them (Hello, HelloWithCookie, Welcome).
constexpr std::size_t kHeaderWithSourceSize = kCommonHeaderSize + kConnectionIdSize;
// The common header and the checksum: what every datagram has.
constexpr std::size_t kMinimumPacketSize = kCommonHeaderSize + kChecksumSize;
constexpr std::uint8_t kLastPacketType = static_cast<std::uint8_t>(PacketType::AuthRefusal);
// SecureHelloWithCookie: source, cookie, ephemeral key, then the sealed part's length (u16).
constexpr std::size_t kSecureHelloHeaderSize =
    kHeaderWithSourceSize + kCookieSize + kX25519KeySize + 2;
// SecureWelcome: source and ephemeral key.
constexpr std::size_t kSecureWelcomeHeaderSize = kHeaderWithSourceSize + kX25519KeySize;
// The handshake payload: parameters, reset token, flags.
constexpr std::size_t kHandshakePayloadFixedSize = kResetTokenSize + 1;
// The range count of an ACK never exceeds kMaxAckRanges - 1, which always fits in one byte.
static_assert(kMaxAckRanges - 1 <= 63, "the ACK range count must be a one-byte varint");

// The four variable-length integer encodings (RFC 9000 16), indexed by the two high bits of the
// first byte: how many bytes, and the largest value each holds.
struct VarIntForm {
  std::size_t size;
  std::uint64_t maximum;
};
constexpr VarIntForm kVarIntForms[4] = {{1, 0x3F}, {2, 0x3FFF}, {4, 0x3FFFFFFF}, {8, kMaxVarInt}};

// The index of the shortest form that holds `value` (<= kMaxVarInt).
constexpr unsigned VarIntFormFor(std::uint64_t value) noexcept {
  unsigned form = 0;
  while (form < 3 && value > kVarIntForms[form].maximum) ++form;
  return form;
}

// Values above kMaxVarInt break the caller's contract; saturating keeps the encoding well formed.
constexpr std::uint64_t Saturate(std::uint64_t value) noexcept {
  return value > kMaxVarInt ? kMaxVarInt : value;
}

std::uint64_t LoadBig(const std::uint8_t* p, std::size_t size) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < size; ++i) value = (value << 8) | p[i];
  return value;
}

void StoreBig(std::uint8_t* p, std::uint64_t value, std::size_t size) noexcept {
  for (std::size_t i = size; i > 0; --i) {
    p[i - 1] = static_cast<std::uint8_t>(value);
    value >>= 8;
  }
}

// Bounds-checked cursor over [position, end). Every read checks the space left first and moves
// nothing on failure, so no input can make it read outside the datagram.
class Reader {
 public:
  Reader(const std::uint8_t* position, const std::uint8_t* end) noexcept
      : m_position(position), m_end(end) {}

  std::size_t Left() const noexcept { return static_cast<std::size_t>(m_end - m_position); }
  const std::uint8_t* Position() const noexcept { return m_position; }

  bool ReadVarInt(std::uint64_t& value) noexcept {
    if (m_position == m_end) return false;
    const VarIntForm& form = kVarIntForms[m_position[0] >> 6];
    if (Left() < form.size) return false;
    // Non-minimal encodings are accepted: the length prefix alone decides the size.
    value = LoadBig(m_position, form.size) & form.maximum;
    m_position += form.size;
    return true;
  }

  bool ReadBig64(std::uint64_t& value) noexcept {
    if (Left() < 8) return false;
    value = LoadBig(m_position, 8);
    m_position += 8;
    return true;
  }

  bool ReadBytes(std::uint8_t* out, std::size_t size) noexcept {
    if (Left() < size) return false;
    std::memcpy(out, m_position, size);
    m_position += size;
    return true;
  }

  bool Skip(std::size_t size) noexcept {
    if (Left() < size) return false;
    m_position += size;
    return true;
  }

 private:
  const std::uint8_t* m_position;
  const std::uint8_t* m_end;
};

bool ReadParameters(Reader& reader, TransportParameters& parameters) noexcept {
  return reader.ReadVarInt(parameters.maxAckDelayMs) &&
         reader.ReadVarInt(parameters.initialMaxData) &&
         reader.ReadVarInt(parameters.maxDatagramSize) &&
         reader.ReadVarInt(parameters.idleTimeoutMs) &&
         reader.ReadVarInt(parameters.maxMessageSize);
}

DecodeStatus ReadAck(Reader& reader, AckFrame& ack) noexcept {
  std::uint64_t largest = 0;
  std::uint64_t delay = 0;
  std::uint64_t additional = 0;
  std::uint64_t firstRange = 0;
  if (!reader.ReadVarInt(largest) || !reader.ReadVarInt(delay) || !reader.ReadVarInt(additional)) {
    return DecodeStatus::TooShort;
  }
  // Rejected before reading the ranges: the count alone shows the frame is out of bounds.
  if (additional >= kMaxAckRanges) return DecodeStatus::BadFrame;
  if (!reader.ReadVarInt(firstRange)) return DecodeStatus::TooShort;
  if (firstRange > largest) return DecodeStatus::BadFrame;

  ack.largest = largest;
  ack.ackDelayMicroseconds = delay;
  ack.ranges[0] = AckRange{largest - firstRange, largest};
  std::uint64_t previousSmallest = largest - firstRange;
  const std::size_t count = static_cast<std::size_t>(additional) + 1;
  for (std::size_t i = 1; i < count; ++i) {
    std::uint64_t gap = 0;
    std::uint64_t length = 0;
    if (!reader.ReadVarInt(gap) || !reader.ReadVarInt(length)) return DecodeStatus::TooShort;
    // nextLargest = previousSmallest - gap - 2, written so that nothing can wrap.
    if (previousSmallest < 2 || gap > previousSmallest - 2) return DecodeStatus::BadFrame;
    const std::uint64_t nextLargest = previousSmallest - 2 - gap;
    if (length > nextLargest) return DecodeStatus::BadFrame;
    ack.ranges[i] = AckRange{nextLargest - length, nextLargest};
    previousSmallest = nextLargest - length;
  }
  ack.rangeCount = count;
  return DecodeStatus::Ok;
}

DecodeStatus ReadStream(Reader& reader, StreamFrame& stream) noexcept {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  if (!reader.ReadVarInt(offset) || !reader.ReadVarInt(length)) return DecodeStatus::TooShort;
  // An empty frame carries nothing and would only let a peer make us do work for free.
  if (length == 0 || length > kMaxVarInt - offset) return DecodeStatus::BadFrame;
  if (length > reader.Left()) return DecodeStatus::TooShort;
  stream.offset = offset;
  stream.data = reader.Position();
  stream.length = static_cast<std::size_t>(length);
  reader.Skip(stream.length);
  return DecodeStatus::Ok;
}

}  // namespace

const char* ToString(DecodeStatus status) noexcept {
  switch (status) {
    case DecodeStatus::Ok:
      return "Ok";
    case DecodeStatus::TooShort:
      return "TooShort";
    case DecodeStatus::BadChecksum:
      return "BadChecksum";
    case DecodeStatus::BadVersion:
      return "BadVersion";
    case DecodeStatus::BadPacketType:
      return "BadPacketType";
    case DecodeStatus::BadFrame:
      return "BadFrame";
    case DecodeStatus::BadHelloSize:
      return "BadHelloSize";
  }
  return "Unknown";
}

std::size_t VarIntSize(std::uint64_t value) noexcept {
  return kVarIntForms[VarIntFormFor(value)].size;
}

DecodeStatus DecodePacket(const std::uint8_t* datagram, std::size_t size,
                          DecodedPacket& out) noexcept {
  if (datagram == nullptr || size < kMinimumPacketSize) return DecodeStatus::TooShort;
  if ((datagram[0] >> 4) != kProtocolVersion) return DecodeStatus::BadVersion;
  const std::uint8_t type = datagram[0] & 0x0Fu;
  if (type > kLastPacketType) return DecodeStatus::BadPacketType;
  // A SecureData packet has no checksum: its AEAD tag, checked by the connection that holds the
  // key, covers every byte.
  const bool secureData = IsSecureData(static_cast<PacketType>(type));
  const std::size_t checksumAt = secureData ? size : size - kChecksumSize;
  if (!secureData &&
      Crc32c(datagram, checksumAt) != LoadBig(datagram + checksumAt, kChecksumSize)) {
    return DecodeStatus::BadChecksum;
  }

  DecodedPacket packet;
  packet.header.type = static_cast<PacketType>(type);
  packet.header.destination = LoadBig(datagram + 1, kConnectionIdSize);
  Reader reader(datagram + 1 + kConnectionIdSize, datagram + checksumAt);
  PacketHeader& header = packet.header;
  // Bytes after the last field of a handshake packet are ignored: Hello padding, and room for
  // later versions to add fields without breaking this decoder.
  switch (header.type) {
    case PacketType::Hello:
      if (size < kHelloSize) return DecodeStatus::BadHelloSize;
      if (!reader.ReadBig64(header.source)) return DecodeStatus::TooShort;
      break;
    case PacketType::Cookie:
      if (!reader.ReadBytes(header.cookie.data(), kCookieSize)) return DecodeStatus::TooShort;
      break;
    case PacketType::HelloWithCookie:
      if (size < kHelloSize) return DecodeStatus::BadHelloSize;
      if (!reader.ReadBig64(header.source) ||
          !reader.ReadBytes(header.cookie.data(), kCookieSize) ||
          !ReadParameters(reader, header.parameters) ||
          !reader.ReadBytes(header.resetToken.data(), kResetTokenSize)) {
        return DecodeStatus::TooShort;
      }
      break;
    case PacketType::Welcome:
      if (!reader.ReadBig64(header.source) || !ReadParameters(reader, header.parameters) ||
          !reader.ReadBytes(header.resetToken.data(), kResetTokenSize)) {
        return DecodeStatus::TooShort;
      }
      break;
    case PacketType::Refusal:
      break;
    case PacketType::Reset:
      if (!reader.ReadBytes(header.resetToken.data(), kResetTokenSize)) {
        return DecodeStatus::TooShort;
      }
      break;
    case PacketType::Data:
      if (!reader.ReadVarInt(header.packetNumber)) return DecodeStatus::TooShort;
      packet.frames = reader.Position();
      packet.framesSize = reader.Left();
      break;
    case PacketType::SecureHelloWithCookie: {
      if (size < kHelloSize) return DecodeStatus::BadHelloSize;
      std::uint8_t sealedSize[2];
      if (!reader.ReadBig64(header.source) ||
          !reader.ReadBytes(header.cookie.data(), kCookieSize) ||
          !reader.ReadBytes(header.ephemeral.data(), kX25519KeySize) ||
          !reader.ReadBytes(sealedSize, sizeof sealedSize)) {
        return DecodeStatus::TooShort;
      }
      packet.frames = reader.Position();
      packet.framesSize = static_cast<std::size_t>(LoadBig(sealedSize, sizeof sealedSize));
      packet.authenticatedSize = kSecureHelloHeaderSize;
      if (packet.framesSize < kAeadTagSize || !reader.Skip(packet.framesSize)) {
        return DecodeStatus::TooShort;
      }
      break;
    }
    case PacketType::SecureWelcome:
      if (!reader.ReadBig64(header.source) ||
          !reader.ReadBytes(header.ephemeral.data(), kX25519KeySize)) {
        return DecodeStatus::TooShort;
      }
      packet.frames = reader.Position();
      packet.framesSize = reader.Left();
      packet.authenticatedSize = kSecureWelcomeHeaderSize;
      if (packet.framesSize < kAeadTagSize) return DecodeStatus::TooShort;
      break;
    case PacketType::SecureData:
    case PacketType::SecureDataPhase1:
      header.keyPhase = header.type == PacketType::SecureDataPhase1;
      if (!reader.ReadVarInt(header.packetNumber)) return DecodeStatus::TooShort;
      packet.frames = reader.Position();
      packet.framesSize = reader.Left();
      packet.authenticatedSize = static_cast<std::size_t>(reader.Position() - datagram);
      if (packet.framesSize < kAeadTagSize) return DecodeStatus::TooShort;
      break;
    case PacketType::AuthRefusal:
      break;
  }
  out = packet;
  return DecodeStatus::Ok;
}

bool DecodeHandshakePayload(const std::uint8_t* data, std::size_t size,
                            TransportParameters& parameters, ResetToken& resetToken,
                            std::uint8_t& flags, const std::uint8_t** clientToken,
                            std::size_t* clientTokenSize) noexcept {
  Reader reader(data, data + size);
  if (!ReadParameters(reader, parameters) ||
      !reader.ReadBytes(resetToken.data(), kResetTokenSize) || !reader.ReadBytes(&flags, 1)) {
    return false;
  }
  if (clientToken == nullptr || clientTokenSize == nullptr) return true;
  *clientToken = nullptr;
  *clientTokenSize = 0;
  const auto rest = static_cast<std::size_t>(data + size - reader.Position());
  if (rest == 0) return true;  // no token
  if (rest < 2) return false;
  const std::uint8_t* const at = reader.Position();
  const auto length = static_cast<std::size_t>(LoadBig(at, 2));
  if (length > kMaxClientTokenSize || length > rest - 2) return false;
  *clientToken = at + 2;
  *clientTokenSize = length;
  return true;
}

bool PeekDestination(const std::uint8_t* datagram, std::size_t size, ConnectionId& out) noexcept {
  if (datagram == nullptr || size < 1 + kConnectionIdSize) return false;
  out = LoadBig(datagram + 1, kConnectionIdSize);
  return true;
}

FrameReader::FrameReader(const std::uint8_t* frames, std::size_t size) noexcept
    : m_position(frames), m_end(frames + size) {
  while (m_position != m_end && *m_position == static_cast<std::uint8_t>(FrameType::Padding)) {
    ++m_position;
  }
}

DecodeStatus FrameReader::Next(Frame& frame) noexcept {
  if (m_position == m_end) return DecodeStatus::TooShort;
  Reader reader(m_position + 1, m_end);
  const std::uint8_t type = *m_position;
  switch (static_cast<FrameType>(type)) {
    case FrameType::Ping:
      break;
    case FrameType::Ack: {
      const DecodeStatus status = ReadAck(reader, frame.ack);
      if (status != DecodeStatus::Ok) return status;
      break;
    }
    case FrameType::Stream: {
      const DecodeStatus status = ReadStream(reader, frame.stream);
      if (status != DecodeStatus::Ok) return status;
      break;
    }
    case FrameType::MaxData:
      if (!reader.ReadVarInt(frame.maxData)) return DecodeStatus::TooShort;
      break;
    case FrameType::Close: {
      std::uint64_t code = 0;
      if (!reader.ReadVarInt(code)) return DecodeStatus::TooShort;
      frame.closeCode = code <= static_cast<std::uint64_t>(CloseCode::ProtocolError)
                            ? static_cast<CloseCode>(code)
                            : CloseCode::ProtocolError;
      break;
    }
    default:  // Padding never gets here: it is skipped below and in the constructor.
      return DecodeStatus::BadFrame;
  }
  frame.type = static_cast<FrameType>(type);
  // Skipping trailing padding now lets AtEnd() be a plain comparison.
  m_position = reader.Position();
  while (m_position != m_end && *m_position == static_cast<std::uint8_t>(FrameType::Padding)) {
    ++m_position;
  }
  return DecodeStatus::Ok;
}

bool FrameReader::AtEnd() const noexcept { return m_position == m_end; }

namespace {

std::uint8_t* WriteVarInt(std::uint8_t* p, std::uint64_t value) noexcept {
  value = Saturate(value);
  const unsigned form = VarIntFormFor(value);
  StoreBig(p, value, kVarIntForms[form].size);
  p[0] |= static_cast<std::uint8_t>(form << 6);
  return p + kVarIntForms[form].size;
}

std::uint8_t* WriteBig64(std::uint8_t* p, std::uint64_t value) noexcept {
  StoreBig(p, value, 8);
  return p + 8;
}

std::uint8_t* WriteParameters(std::uint8_t* p, const TransportParameters& parameters) noexcept {
  p = WriteVarInt(p, parameters.maxAckDelayMs);
  p = WriteVarInt(p, parameters.initialMaxData);
  p = WriteVarInt(p, parameters.maxDatagramSize);
  p = WriteVarInt(p, parameters.idleTimeoutMs);
  return WriteVarInt(p, parameters.maxMessageSize);
}

std::size_t ParametersSize(const TransportParameters& parameters) noexcept {
  return VarIntSize(Saturate(parameters.maxAckDelayMs)) +
         VarIntSize(Saturate(parameters.initialMaxData)) +
         VarIntSize(Saturate(parameters.maxDatagramSize)) +
         VarIntSize(Saturate(parameters.idleTimeoutMs)) +
         VarIntSize(Saturate(parameters.maxMessageSize));
}

std::uint8_t TypeByte(PacketType type) noexcept {
  return static_cast<std::uint8_t>((kProtocolVersion << 4) | static_cast<std::uint8_t>(type));
}

}  // namespace

std::size_t EncodeVarInt(std::uint64_t value, std::uint8_t* out) noexcept {
  return static_cast<std::size_t>(WriteVarInt(out, value) - out);
}

PacketWriter::PacketWriter(std::uint8_t* buffer, std::size_t capacity) noexcept
    : m_begin(buffer), m_position(buffer), m_end(buffer + capacity), m_framesBegin(buffer) {}

bool PacketWriter::Start(PacketType type, ConnectionId destination, std::size_t headerSize,
                         std::size_t minimumSize, std::size_t trailerSize) noexcept {
  m_position = m_begin;
  m_framesBegin = m_begin;
  m_minimumSize = minimumSize;
  m_trailerSize = trailerSize;
  m_type = type;
  m_sealer = nullptr;
  m_failed = false;
  const std::size_t capacity = static_cast<std::size_t>(m_end - m_begin);
  if (capacity < std::max(headerSize + trailerSize, minimumSize)) {
    m_failed = true;
    return false;
  }
  m_begin[0] = TypeByte(type);
  m_position = WriteBig64(m_begin + 1, destination);
  return true;
}

void PacketWriter::BeginHello(ConnectionId source) noexcept {
  if (!Start(PacketType::Hello, 0, kHeaderWithSourceSize, kHelloSize)) return;
  m_position = WriteBig64(m_position, source);
  m_framesBegin = m_position;
}

void PacketWriter::BeginCookie(ConnectionId destination,
                               const std::array<std::uint8_t, kCookieSize>& cookie) noexcept {
  if (!Start(PacketType::Cookie, destination, kCommonHeaderSize + kCookieSize, 0)) return;
  std::memcpy(m_position, cookie.data(), kCookieSize);
  m_position += kCookieSize;
  m_framesBegin = m_position;
}

void PacketWriter::BeginHelloWithCookie(ConnectionId source,
                                        const std::array<std::uint8_t, kCookieSize>& cookie,
                                        const TransportParameters& parameters,
                                        const ResetToken& resetToken) noexcept {
  if (!Start(PacketType::HelloWithCookie, 0,
             kHeaderWithSourceSize + kCookieSize + ParametersSize(parameters) + kResetTokenSize,
             kHelloSize)) {
    return;
  }
  m_position = WriteBig64(m_position, source);
  std::memcpy(m_position, cookie.data(), kCookieSize);
  m_position += kCookieSize;
  m_position = WriteParameters(m_position, parameters);
  std::memcpy(m_position, resetToken.data(), kResetTokenSize);
  m_position += kResetTokenSize;
  m_framesBegin = m_position;
}

void PacketWriter::BeginWelcome(ConnectionId destination, ConnectionId source,
                                const TransportParameters& parameters,
                                const ResetToken& resetToken) noexcept {
  if (!Start(PacketType::Welcome, destination,
             kHeaderWithSourceSize + ParametersSize(parameters) + kResetTokenSize, 0))
    return;
  m_position = WriteBig64(m_position, source);
  m_position = WriteParameters(m_position, parameters);
  std::memcpy(m_position, resetToken.data(), kResetTokenSize);
  m_position += kResetTokenSize;
  m_framesBegin = m_position;
}

void PacketWriter::WriteHandshakePayload(const TransportParameters& parameters,
                                         const ResetToken& resetToken,
                                         std::uint8_t flags) noexcept {
  m_position = WriteParameters(m_position, parameters);
  std::memcpy(m_position, resetToken.data(), kResetTokenSize);
  m_position += kResetTokenSize;
  *m_position++ = flags;
}

void PacketWriter::BeginSecureHelloWithCookie(
    ConnectionId source, const std::array<std::uint8_t, kCookieSize>& cookie,
    const X25519Key& ephemeral, const TransportParameters& parameters, const ResetToken& resetToken,
    std::uint8_t flags, IPacketSealer& sealer, const std::uint8_t* clientToken,
    std::size_t clientTokenSize) noexcept {
  if (clientToken == nullptr || clientTokenSize > kMaxClientTokenSize) clientTokenSize = 0;
  const std::size_t tokenSize = clientTokenSize > 0 ? 2 + clientTokenSize : 0;
  if (!Start(PacketType::SecureHelloWithCookie, 0,
             kSecureHelloHeaderSize + ParametersSize(parameters) + kHandshakePayloadFixedSize +
                 tokenSize,
             kHelloSize, kAeadTagSize + kChecksumSize)) {
    return;
  }
  m_position = WriteBig64(m_position, source);
  std::memcpy(m_position, cookie.data(), kCookieSize);
  m_position += kCookieSize;
  std::memcpy(m_position, ephemeral.data(), kX25519KeySize);
  m_position += kX25519KeySize;
  m_position += 2;  // the sealed part's size, written by Finish
  m_framesBegin = m_position;
  WriteHandshakePayload(parameters, resetToken, flags);
  if (clientTokenSize > 0) {
    StoreBig(m_position, clientTokenSize, 2);
    std::memcpy(m_position + 2, clientToken, clientTokenSize);
    m_position += 2 + clientTokenSize;
  }
  m_sealer = &sealer;
}

void PacketWriter::BeginSecureWelcome(ConnectionId destination, ConnectionId source,
                                      const X25519Key& ephemeral,
                                      const TransportParameters& parameters,
                                      const ResetToken& resetToken, std::uint8_t flags,
                                      IPacketSealer& sealer) noexcept {
  if (!Start(PacketType::SecureWelcome, destination,
             kSecureWelcomeHeaderSize + ParametersSize(parameters) + kHandshakePayloadFixedSize, 0,
             kAeadTagSize + kChecksumSize)) {
    return;
  }
  m_position = WriteBig64(m_position, source);
  std::memcpy(m_position, ephemeral.data(), kX25519KeySize);
  m_position += kX25519KeySize;
  m_framesBegin = m_position;
  WriteHandshakePayload(parameters, resetToken, flags);
  m_sealer = &sealer;
}

void PacketWriter::BeginSecureData(ConnectionId destination, PacketNumber packetNumber,
                                   bool keyPhase, IPacketSealer& sealer) noexcept {
  if (!Start(keyPhase ? PacketType::SecureDataPhase1 : PacketType::SecureData, destination,
             kCommonHeaderSize + VarIntSize(Saturate(packetNumber)), 0, kAeadTagSize)) {
    return;
  }
  m_position = WriteVarInt(m_position, packetNumber);
  m_framesBegin = m_position;
  m_sealer = &sealer;
}

void PacketWriter::BeginAuthRefusal(ConnectionId destination) noexcept {
  if (!Start(PacketType::AuthRefusal, destination, kCommonHeaderSize, 0)) return;
  m_framesBegin = m_position;
}

void PacketWriter::BeginRefusal(ConnectionId destination) noexcept {
  if (!Start(PacketType::Refusal, destination, kCommonHeaderSize, 0)) return;
  m_framesBegin = m_position;
}

void PacketWriter::BeginReset(ConnectionId destination, const ResetToken& resetToken) noexcept {
  if (!Start(PacketType::Reset, destination, kCommonHeaderSize + kResetTokenSize, 0)) return;
  std::memcpy(m_position, resetToken.data(), kResetTokenSize);
  m_position += kResetTokenSize;
  m_framesBegin = m_position;
}

void PacketWriter::BeginData(ConnectionId destination, PacketNumber packetNumber) noexcept {
  if (!Start(PacketType::Data, destination, kCommonHeaderSize + VarIntSize(Saturate(packetNumber)),
             0))
    return;
  m_position = WriteVarInt(m_position, packetNumber);
  m_framesBegin = m_position;
}

bool PacketWriter::AppendPing() noexcept {
  if (Remaining() < 1) return false;
  *m_position++ = static_cast<std::uint8_t>(FrameType::Ping);
  return true;
}

bool PacketWriter::AppendAck(const AckRange* ranges, std::size_t rangeCount,
                             std::uint64_t ackDelayMicroseconds) noexcept {
  if (ranges == nullptr || rangeCount == 0 || ranges[0].smallest > ranges[0].largest) return false;
  const std::uint64_t delay = Saturate(ackDelayMicroseconds);
  const std::size_t room = Remaining();
  // Type, largest, delay, one-byte range count, first range.
  std::size_t size = 1 + VarIntSize(ranges[0].largest) + VarIntSize(delay) + 1 +
                     VarIntSize(ranges[0].largest - ranges[0].smallest);
  if (size > room) return false;

  // First pass: how many ranges fit. Ranges that break the contract (overlapping, adjacent, out
  // of order) end the frame instead of being encoded as garbage.
  const std::size_t limit = std::min(rangeCount, kMaxAckRanges);
  std::size_t count = 1;
  for (std::uint64_t previousSmallest = ranges[0].smallest; count < limit; ++count) {
    const AckRange& range = ranges[count];
    if (range.smallest > range.largest || previousSmallest < 2 ||
        range.largest > previousSmallest - 2) {
      break;
    }
    const std::size_t extra = VarIntSize(previousSmallest - 2 - range.largest) +
                              VarIntSize(range.largest - range.smallest);
    if (size + extra > room) break;
    size += extra;
    previousSmallest = range.smallest;
  }

  std::uint8_t* p = m_position;
  *p++ = static_cast<std::uint8_t>(FrameType::Ack);
  p = WriteVarInt(p, ranges[0].largest);
  p = WriteVarInt(p, delay);
  p = WriteVarInt(p, count - 1);
  p = WriteVarInt(p, ranges[0].largest - ranges[0].smallest);
  for (std::size_t i = 1; i < count; ++i) {
    p = WriteVarInt(p, ranges[i - 1].smallest - 2 - ranges[i].largest);
    p = WriteVarInt(p, ranges[i].largest - ranges[i].smallest);
  }
  m_position = p;
  return true;
}

std::uint8_t* PacketWriter::AppendStreamHeader(std::uint64_t offset, std::size_t length,
                                               std::size_t* count) noexcept {
  *count = 0;
  if (length == 0 || offset >= kMaxVarInt) return nullptr;
  const std::size_t room = Remaining();
  const std::size_t fixed = 1 + VarIntSize(offset);
  if (room <= fixed + 1) return nullptr;  // type, offset, a length byte and one data byte at least
  const std::size_t available = room - fixed;  // for the length field and the data

  // The largest n whose length field plus n bytes fit: try each length-field size.
  const std::uint64_t wanted = std::min<std::uint64_t>(length, kMaxVarInt - offset);
  std::uint64_t best = 0;
  for (const VarIntForm& field : kVarIntForms) {
    if (available <= field.size) break;
    best = std::max(best, std::min({wanted, std::uint64_t{available - field.size}, field.maximum}));
  }
  if (best == 0) return nullptr;

  *count = static_cast<std::size_t>(best);
  std::uint8_t* p = m_position;
  *p++ = static_cast<std::uint8_t>(FrameType::Stream);
  p = WriteVarInt(p, offset);
  p = WriteVarInt(p, *count);
  m_position = p + *count;
  return p;
}

bool PacketWriter::AppendMaxData(std::uint64_t maxData) noexcept {
  const std::uint64_t value = Saturate(maxData);
  if (Remaining() < 1 + VarIntSize(value)) return false;
  *m_position++ = static_cast<std::uint8_t>(FrameType::MaxData);
  m_position = WriteVarInt(m_position, value);
  return true;
}

bool PacketWriter::AppendClose(CloseCode code) noexcept {
  const std::uint64_t value = Saturate(static_cast<std::uint64_t>(code));
  if (Remaining() < 1 + VarIntSize(value)) return false;
  *m_position++ = static_cast<std::uint8_t>(FrameType::Close);
  m_position = WriteVarInt(m_position, value);
  return true;
}

void PacketWriter::PadTo(std::size_t datagramSize) noexcept {
  const auto capacity = static_cast<std::size_t>(m_end - m_begin);
  m_minimumSize = std::max(m_minimumSize, std::min(datagramSize, capacity));
}

std::size_t PacketWriter::Remaining() const noexcept {
  if (m_failed) return 0;
  const std::size_t left = static_cast<std::size_t>(m_end - m_position);
  return left > m_trailerSize ? left - m_trailerSize : 0;
}

std::size_t PacketWriter::FramesSize() const noexcept {
  return static_cast<std::size_t>(m_position - m_framesBegin);
}

std::size_t PacketWriter::Finish() noexcept {
  if (m_failed) return 0;
  if (m_sealer != nullptr) {
    const bool secureData = IsSecureData(m_type);
    if (secureData && m_minimumSize > 0) {
      // PADDING frames, inside the plaintext, so that the sealed datagram has the minimum size.
      std::uint8_t* const paddingEnd = m_begin + (m_minimumSize - kAeadTagSize);
      if (m_position < paddingEnd) {
        std::memset(m_position, 0, static_cast<std::size_t>(paddingEnd - m_position));
        m_position = paddingEnd;
      }
    }
    const auto plaintextSize = static_cast<std::size_t>(m_position - m_framesBegin);
    if (m_type == PacketType::SecureHelloWithCookie) {
      StoreBig(m_framesBegin - 2, plaintextSize + kAeadTagSize, 2);
    }
    m_sealer->Seal(m_begin, static_cast<std::size_t>(m_framesBegin - m_begin), plaintextSize);
    m_position += kAeadTagSize;
    m_sealer = nullptr;
    if (secureData) return static_cast<std::size_t>(m_position - m_begin);
  }
  if (m_minimumSize > 0) {
    // Padding bytes are PADDING frames in a Data packet; ignored after a Hello's fields.
    std::uint8_t* const paddingEnd = m_begin + (m_minimumSize - kChecksumSize);
    if (m_position < paddingEnd) {
      std::memset(m_position, 0, static_cast<std::size_t>(paddingEnd - m_position));
      m_position = paddingEnd;
    }
  }
  const std::size_t size = static_cast<std::size_t>(m_position - m_begin);
  StoreBig(m_position, Crc32c(m_begin, size), kChecksumSize);
  m_position += kChecksumSize;
  return size + kChecksumSize;
}

}  // namespace timerwheel::rudp::detail
