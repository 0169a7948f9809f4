// Encoding and decoding of ReliableUDP datagrams (the layout is in
// docs/reliable-udp-wire-format.md).
//
// Decoding never throws and never reads outside the datagram: every malformed input is reported
// as a DecodeStatus. Encoding writes into a caller-supplied buffer and never allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/KeySchedule.h"
#include "ReliableUDP/Detail/PacketProtection.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

enum class PacketType : std::uint8_t {
  Hello = 0,            // client -> server: source CID, padded to kHelloSize
  Cookie = 1,           // server -> client: destination CID = client CID, the cookie
  HelloWithCookie = 2,  // client -> server: source CID, cookie, parameters, padded to kHelloSize
  Welcome = 3,          // server -> client: destination CID = client CID, server CID, parameters
  Data = 4,             // either way: destination CID, packet number, frames
  // server -> client: destination CID = client CID; the server will not take the connection
  // now (full, or over an admission limit). Stateless, smaller than the Hello it answers.
  Refusal = 5,
  // either way, to a peer whose connection ID is unknown here: destination CID = that unknown ID
  // (echoed), then the reset token derived from it. Stateless, smaller than the packet answered.
  Reset = 6,
  // The encrypted handshake and packets (issue 20), used when the server has a static key:
  // client -> server: source CID, cookie, the client's ephemeral X25519 key, then its parameters
  // and reset token sealed under the handshake's hello key; padded to kHelloSize.
  SecureHelloWithCookie = 7,
  // server -> client: destination CID = client CID, server CID, the server's ephemeral key, then
  // its parameters and reset token sealed under the welcome key.
  SecureWelcome = 8,
  // either way: destination CID, packet number, frames sealed under the packet key of key phase
  // 0 (SecureData) or 1 (SecureDataPhase1); the AEAD tag in place of the checksum.
  SecureData = 9,
  SecureDataPhase1 = 10,
  // server -> client: destination CID = client CID; the server cannot authenticate this
  // handshake (the client pinned another key, or one side encrypts and the other does not).
  // Stateless and unauthenticated, like Refusal.
  AuthRefusal = 11,
};

inline bool IsSecureData(PacketType type) noexcept {
  return type == PacketType::SecureData || type == PacketType::SecureDataPhase1;
}

// Seals a packet that PacketWriter built (see PacketWriter::BeginSecure*).
class IPacketSealer {
 public:
  // packet[0, authenticatedSize) is the header (associated data): encrypts
  // packet[authenticatedSize, authenticatedSize + plaintextSize) in place and writes the
  // kAeadTagSize-byte tag right after it.
  virtual void Seal(std::uint8_t* packet, std::size_t authenticatedSize,
                    std::size_t plaintextSize) noexcept = 0;

 protected:
  ~IPacketSealer() = default;
};

enum class FrameType : std::uint8_t {
  Padding = 0x00,
  Ping = 0x01,
  Ack = 0x02,
  Stream = 0x03,
  MaxData = 0x04,
  Close = 0x05,
};

enum class CloseCode : std::uint64_t { Graceful = 0, Aborted = 1, ProtocolError = 2 };

enum class DecodeStatus {
  Ok,
  TooShort,       // shorter than the smallest packet of its type, or a field runs past the end
  BadChecksum,    // CRC-32C trailer does not match
  BadVersion,     // version nibble is not kProtocolVersion
  BadPacketType,  // unknown packet type
  BadFrame,       // unknown frame type or a malformed frame (e.g. ACK range underflow)
  BadHelloSize,   // Hello / HelloWithCookie shorter than kHelloSize
};
const char* ToString(DecodeStatus status) noexcept;

// QUIC variable-length integers (RFC 9000 section 16): 1, 2, 4 or 8 bytes, values < 2^62.
inline constexpr std::uint64_t kMaxVarInt = (std::uint64_t{1} << 62) - 1;
std::size_t VarIntSize(std::uint64_t value) noexcept;  // value must be <= kMaxVarInt
// Writes the minimal encoding of `value` (<= kMaxVarInt) at `out`; returns its size (1-8).
std::size_t EncodeVarInt(std::uint64_t value, std::uint8_t* out) noexcept;

// What a peer says about itself in HelloWithCookie and Welcome.
struct TransportParameters {
  std::uint64_t maxAckDelayMs = 0;    // the longest it delays an ACK
  std::uint64_t initialMaxData = 0;   // its initial receive window (bytes of stream)
  std::uint64_t maxDatagramSize = 0;  // the largest datagram it accepts
  std::uint64_t idleTimeoutMs = 0;    // its idle timeout
  std::uint64_t maxMessageSize = 0;   // the largest message it accepts
};

// The fixed part of every packet.
struct PacketHeader {
  PacketType type = PacketType::Data;
  ConnectionId destination = 0;
  // Hello, HelloWithCookie, Welcome: the sender's own connection ID.
  ConnectionId source = 0;
  // Cookie, HelloWithCookie.
  std::array<std::uint8_t, kCookieSize> cookie{};
  // HelloWithCookie, Welcome.
  TransportParameters parameters;
  // HelloWithCookie, Welcome: the reset token of the sender's connection ID. Reset: the token.
  ResetToken resetToken{};
  // Data, SecureData: the full packet number.
  PacketNumber packetNumber = 0;
  // SecureHelloWithCookie, SecureWelcome: the sender's ephemeral public key.
  X25519Key ephemeral{};
  // SecureData: the key phase bit (SecureDataPhase1).
  bool keyPhase = false;
};

// The handshake flags, sealed with the parameters: the client's bit says it can use AES-256-GCM,
// the server's that the connection does (both can).
inline constexpr std::uint8_t kHandshakeFlagAes256Gcm = 0x01;

// A decoded datagram: the header, and for Data packets the undecoded frame bytes; for the Secure
// types the sealed bytes (ciphertext and tag), and where they start (the authenticated header's
// size).
struct DecodedPacket {
  PacketHeader header;
  const std::uint8_t* frames = nullptr;  // points into the datagram, checksum excluded
  std::size_t framesSize = 0;
  std::size_t authenticatedSize = 0;  // Secure types: frames - datagram
};

// The plaintext sealed in a SecureHelloWithCookie or SecureWelcome: the transport parameters,
// the reset token, then one byte of flags; in a SecureHelloWithCookie optionally the client
// token after them (a 2-byte length, then its bytes). False if it is short, or the token's length
// is over kMaxClientTokenSize or beyond the plaintext. clientToken (may be null: bytes after the
// flags are then ignored) points into `data`; clientTokenSize 0: none.
bool DecodeHandshakePayload(const std::uint8_t* data, std::size_t size,
                            TransportParameters& parameters, ResetToken& resetToken,
                            std::uint8_t& flags, const std::uint8_t** clientToken = nullptr,
                            std::size_t* clientTokenSize = nullptr) noexcept;

// Checks version, type, size and checksum, and decodes the header. Frames are decoded by
// FrameReader.
DecodeStatus DecodePacket(const std::uint8_t* datagram, std::size_t size,
                          DecodedPacket& out) noexcept;

// Cheap peek used for demultiplexing before the checksum is verified: the destination CID of a
// datagram that is long enough to have one (else false).
bool PeekDestination(const std::uint8_t* datagram, std::size_t size, ConnectionId& out) noexcept;

// One inclusive range of packet numbers, smallest <= largest.
struct AckRange {
  PacketNumber smallest = 0;
  PacketNumber largest = 0;
};
inline constexpr std::size_t kMaxAckRanges = 32;  // more in one frame is BadFrame

struct AckFrame {
  PacketNumber largest = 0;
  std::uint64_t ackDelayMicroseconds = 0;
  std::size_t rangeCount = 0;                    // >= 1
  std::array<AckRange, kMaxAckRanges> ranges{};  // descending: ranges[0].largest == largest
};

struct StreamFrame {
  std::uint64_t offset = 0;  // offset + length <= kMaxVarInt, else BadFrame
  const std::uint8_t* data = nullptr;
  std::size_t length = 0;
};

struct Frame {
  FrameType type = FrameType::Padding;
  AckFrame ack;               // type == Ack
  StreamFrame stream;         // type == Stream
  std::uint64_t maxData = 0;  // type == MaxData
  // type == Close (unknown codes decode as ProtocolError)
  CloseCode closeCode = CloseCode::Graceful;
};

// Walks the frames of a Data packet. Runs of Padding are skipped (never returned).
class FrameReader {
 public:
  FrameReader(const std::uint8_t* frames, std::size_t size) noexcept;
  // Ok and fills `frame`; or TooShort/BadFrame (then stop: the packet is malformed; the reader
  // stays on the bad frame, so calling again repeats the error). AtEnd() when done; Next() at the
  // end returns TooShort.
  DecodeStatus Next(Frame& frame) noexcept;
  bool AtEnd() const noexcept;

 private:
  const std::uint8_t* m_position;
  const std::uint8_t* m_end;
};

// Builds one datagram in a caller-supplied buffer. Usage: Begin*, then (Data only) Append* as
// long as they return true, then Finish() which writes the checksum and returns the size.
// Append* return false, writing nothing, when the frame does not fit in the space left.
// If the capacity cannot hold the header and checksum (kHelloSize for Hello/HelloWithCookie),
// Begin* writes nothing, Remaining() is 0, Append* fail and Finish() returns 0.
// Integers above kMaxVarInt are a contract violation; they are written as kMaxVarInt.
class PacketWriter {
 public:
  PacketWriter(std::uint8_t* buffer, std::size_t capacity) noexcept;

  // Hello and HelloWithCookie are padded to kHelloSize by Finish (capacity must allow it).
  void BeginHello(ConnectionId source) noexcept;
  void BeginCookie(ConnectionId destination,
                   const std::array<std::uint8_t, kCookieSize>& cookie) noexcept;
  void BeginHelloWithCookie(ConnectionId source,
                            const std::array<std::uint8_t, kCookieSize>& cookie,
                            const TransportParameters& parameters,
                            const ResetToken& resetToken = {}) noexcept;
  void BeginWelcome(ConnectionId destination, ConnectionId source,
                    const TransportParameters& parameters,
                    const ResetToken& resetToken = {}) noexcept;
  void BeginData(ConnectionId destination, PacketNumber packetNumber) noexcept;
  // The Secure types: what Begin writes after the header is the plaintext (for SecureData,
  // Append* add to it), and Finish pads it (SecureData: PADDING frames, to PadTo's size with the
  // tag), has `sealer` encrypt it in place and add the tag, then (handshake packets) pads to
  // kHelloSize and appends the checksum. SecureData has no checksum: the tag covers it all.
  // `sealer` must outlive Finish.
  // clientToken: up to kMaxClientTokenSize bytes sealed after the flags (none if size 0).
  void BeginSecureHelloWithCookie(ConnectionId source,
                                  const std::array<std::uint8_t, kCookieSize>& cookie,
                                  const X25519Key& ephemeral, const TransportParameters& parameters,
                                  const ResetToken& resetToken, std::uint8_t flags,
                                  IPacketSealer& sealer, const std::uint8_t* clientToken = nullptr,
                                  std::size_t clientTokenSize = 0) noexcept;
  void BeginSecureWelcome(ConnectionId destination, ConnectionId source, const X25519Key& ephemeral,
                          const TransportParameters& parameters, const ResetToken& resetToken,
                          std::uint8_t flags, IPacketSealer& sealer) noexcept;
  void BeginSecureData(ConnectionId destination, PacketNumber packetNumber, bool keyPhase,
                       IPacketSealer& sealer) noexcept;
  void BeginAuthRefusal(ConnectionId destination) noexcept;
  void BeginRefusal(ConnectionId destination) noexcept;
  void BeginReset(ConnectionId destination, const ResetToken& resetToken) noexcept;

  bool AppendPing() noexcept;
  // ranges: descending, disjoint and not adjacent; writes as many as fit (at least the first),
  // up to kMaxAckRanges. Returns false if not even the first fits.
  bool AppendAck(const AckRange* ranges, std::size_t rangeCount,
                 std::uint64_t ackDelayMicroseconds) noexcept;
  // Writes a STREAM frame's header for as many of `length` bytes as fit (*count, at least 1) and
  // returns where the caller must write exactly those bytes; nullptr (nothing written) if not
  // even one fits. The sender reads its stream straight into the datagram, with no copy between.
  std::uint8_t* AppendStreamHeader(std::uint64_t offset, std::size_t length,
                                   std::size_t* count) noexcept;
  bool AppendMaxData(std::uint64_t maxData) noexcept;
  bool AppendClose(CloseCode code) noexcept;

  // The datagram being built (Finish() says how many bytes of it to send).
  const std::uint8_t* Data() const noexcept { return m_begin; }

  // Makes Finish pad the datagram to at least `datagramSize` bytes (as far as the capacity
  // allows): PADDING frames in a Data packet. Call after Begin*.
  void PadTo(std::size_t datagramSize) noexcept;

  // Space left for frames, after reserving the checksum (or the tag).
  std::size_t Remaining() const noexcept;
  // Bytes of frames appended so far (0: nothing but the header).
  std::size_t FramesSize() const noexcept;
  // Pads (Hello/HelloWithCookie to kHelloSize, or as PadTo asked), appends the CRC-32C and returns
  // the datagram's size.
  std::size_t Finish() noexcept;

 private:
  // Resets the writer and writes the type byte and destination; false if the header does not fit.
  bool Start(PacketType type, ConnectionId destination, std::size_t headerSize,
             std::size_t minimumSize, std::size_t trailerSize = kChecksumSize) noexcept;
  void WriteHandshakePayload(const TransportParameters& parameters, const ResetToken& resetToken,
                             std::uint8_t flags) noexcept;

  std::uint8_t* m_begin;
  std::uint8_t* m_position;
  std::uint8_t* m_end;
  std::uint8_t* m_framesBegin;
  std::size_t m_minimumSize = 0;              // Finish pads to this (checksum included)
  std::size_t m_trailerSize = kChecksumSize;  // after the frames: checksum, tag, or both
  PacketType m_type = PacketType::Data;
  IPacketSealer* m_sealer = nullptr;  // the Secure types
  bool m_failed = false;
};

}  // namespace timerwheel::rudp::detail
