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

}  // namespace timerwheel::test
