// Writing frames by hand, for tests and fuzzers that build their own packets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ReliableUDP/Detail/WireFormat.h"

namespace timerwheel::test {

// Writes as much of [data, data + length) as fits as one STREAM frame, at least 1 byte (else
// false, nothing written); *written says how much. The transport itself reads its stream
// straight into the datagram (AppendStreamHeader); tests have their bytes in a buffer.
inline bool AppendStreamFrame(rudp::detail::PacketWriter& writer, std::uint64_t offset,
                              const std::uint8_t* data, std::size_t length, std::size_t* written) {
  if (written != nullptr) *written = 0;
  if (data == nullptr) return false;
  std::size_t count = 0;
  std::uint8_t* at = writer.AppendStreamHeader(offset, length, &count);
  if (at == nullptr) return false;
  std::memcpy(at, data, count);
  if (written != nullptr) *written = count;
  return true;
}

// Writes `frame`, as FrameReader decoded it, with the writer's own encoding; a STREAM frame as
// much of it as fits (*streamWritten says how much). False, with nothing written, if it does not
// fit (a STREAM frame: not even one byte) or for Padding, which the reader never returns. The one
// re-encoder of the fuzzers and tests: what they check is that decoding and encoding agree.
inline bool AppendFrame(rudp::detail::PacketWriter& writer, const rudp::detail::Frame& frame,
                        std::size_t* streamWritten = nullptr) {
  using rudp::detail::FrameType;
  if (streamWritten != nullptr) *streamWritten = 0;
  switch (frame.type) {
    case FrameType::Ping:
      return writer.AppendPing();
    case FrameType::Ack:
      return writer.AppendAck(frame.ack.ranges.data(), frame.ack.rangeCount,
                              frame.ack.ackDelayMicroseconds);
    case FrameType::Stream:
      return AppendStreamFrame(writer, frame.stream.offset, frame.stream.data, frame.stream.length,
                               streamWritten);
    case FrameType::MaxData:
      return writer.AppendMaxData(frame.maxData);
    case FrameType::Close:
      return writer.AppendClose(frame.closeCode);
    case FrameType::Padding:
      break;
  }
  return false;
}

}  // namespace timerwheel::test
