// The input format of ConnectionFuzzer, shared with the seed generator (MakeSeedCorpus).
//
// Byte 0 chooses the endpoints' options (both sides alike):
//   bit 0  timers in the heap TimerQueue (else the 1 ms TimerWheel, the default)
//   bit 1  congestion control None (else NewReno)
//   bit 2  small sizes: messages up to 8 KiB, a 12 KiB receive window, a 4 KiB send buffer
//          (flow control and back-pressure within a few datagrams)
//   bit 3  pacing off
//   bit 4  short timeouts: idle 2 s, keepalive 500 ms, handshake 2 s
//   bit 5  encrypted (issue 20): the server has a key pair and the client pins it; injected Data
//          packets are sealed with the impersonated sender's own keys (see InjectKind), so the
//          frames the input gives reach the frame decoder behind the AEAD
// Then, until the input ends, operations: an opcode byte (modulo kConnectionOpCount) and its
// arguments. "side" is one byte, bit 0: 0 the client, 1 the server.
#pragma once

#include <cstddef>
#include <cstdint>

namespace timerwheel::fuzz {

enum class ConnectionOp : std::uint8_t {
  Send,          // side, size class (byte % 4: 0 tiny (byte % 64), 1 small (U16 % 1500),
                 // 2 medium (U16 % 20000), 3 large (U16 * 16)), clamped to the maximum
  SendTooLarge,  // side: maximum message size + 1 (must fail with MessageTooLarge)
  Receive,       // side: one more AsyncReceive (at most 4 pending per side)
  AutoReceive,   // side: toggles "keep a receive pending at all times"
  Advance,       // selector byte % 4: 0 run what is due now, 1 byte x 100 us,
                 // 2 U16 x 100 us, 3 U16 x 1 ms (then the network runs to that time)
  Inject,        // side (the recipient), mode, then by mode (see InjectKind)
  Close,         // side
  Abort,         // side
  Release,       // side: drops the application's Connection handle
  Link,          // direction (byte & 1: 0 client -> server), field (byte % 7), value (byte)
};
inline constexpr std::uint8_t kConnectionOpCount = 10;
inline constexpr std::uint8_t kConfigurationEncrypted = 0x20;  // byte 0, bit 5

// Inject: the mode byte's bits 0-2. Bit 3: the datagram comes from a third address (10.0.0.1:9002)
// instead of the peer's. Bits 4-5: the packet number of a constructed Data packet: 0 the
// impersonated sender's next, 1 next + byte, 2 largest - byte (an old or duplicate number),
// 3 U64 (masked to 62 bits).
//
// Every injected datagram that is a well-formed Data packet addressed to a real connection ID
// is then made truthful about stream data: STREAM frames whose bytes differ from what the
// impersonated sender's application really sent (or lie beyond what it has sent so far) are
// rewritten with the real bytes or cut. Without cryptography a forged STREAM frame is
// indistinguishable from a real one, so that is the only way the "data arrives intact"
// invariant can hold against an in-path attacker; everything else (ACKs of anything, MAX_DATA,
// CLOSE, packet numbers, malformed frames) is left as the input says. Encrypted, a constructed
// Data packet is then sealed as SecureData under the keys of the impersonated sender's connection
// (its current phase, with the packet number the input chose), if that connection still exists
// (else it goes in clear, and is dropped as unprotected); DataBadChecksum flips a bit of the tag.
// Replays are of the sealed datagrams; a mutated one fails the tag.
enum class InjectKind : std::uint8_t {
  Raw,              // U16 % 2048 bytes as the datagram
  RawChecksum,      // U16 % 2048 bytes, then their CRC-32C
  RawHelloSized,    // U16 % 2048 bytes, zero-padded to 1196, then the CRC-32C
  Data,             // a Data packet to the recipient's real connection ID: packet number (bits
                    // 4-5), U16 % 1400 bytes of frames, CRC-32C
  Replay,           // byte: one of the last 64 real datagrams sent to the recipient, again
  ReplayMutated,    // byte, U16 position, byte xor-ed there, checksum recomputed
  DataAckRelative,  // like Data, but every ACK frame is rebased below the recipient's largest
                    // packet number sent: largest' = sent - min(largest, sent), ranges kept
                    // at the same distances below it (cut at 0)
  DataBadChecksum,  // like Data, with the checksum's last byte flipped
};

// The bytes of the application message number `index` (counted per sender over every AsyncSend
// of the input) of `size` bytes. The index is in the first bytes, so a duplicate, a loss or a
// reordering of whole messages is seen even where contents would match.
inline std::uint8_t MessageByte(std::uint64_t index, std::size_t position) {
  if (position < 4) return static_cast<std::uint8_t>(index >> (8 * position));
  const std::uint64_t mixed =
      (index + 1) * 0x9E3779B97F4A7C15ull + position * 0xBF58476D1CE4E5B9ull;
  return static_cast<std::uint8_t>(mixed >> 56);
}

}  // namespace timerwheel::fuzz
