// Validation of EndpointOptions: bad options fail at construction, naming the option.
#include "ReliableUDP/EndpointOptions.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ReliableUDP/Detail/KeySchedule.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp {
namespace {

void Require(bool condition, const char* what) {
  if (!condition) throw std::invalid_argument(std::string("ReliableUDP EndpointOptions: ") + what);
}

// Stream offsets are 64-bit and the window goes on the wire as a 62-bit varint: a window, buffer
// or budget near 2^64 wrapped the engine's `consumed + window` sums (a connection then failed
// with ProtocolError after its first message). 1 TiB is beyond any machine's memory and far from
// overflow.
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 40;
bool AtMostMaxBytes(std::size_t bytes) { return std::uint64_t{bytes} <= kMaxBytes; }

// The key-exchange shares (see EndpointOptions.h): the defaults, a tenth and a quarter of the
// rate, are filled in only after what the caller set has been checked, and clipped to it, so
// that an error never names an option the caller did not set.
void FillKeyExchangeShares(EndpointOptions& options) {
  const std::size_t rate = options.newConnectionsPerSecond;
  std::size_t& address = options.keyExchangesPerAddressPerSecond;
  std::size_t& prefix = options.keyExchangesPerPrefixPerSecond;
  if (rate == 0) {
    Require(address == 0 && prefix == 0,
            "keyExchangesPerAddressPerSecond and keyExchangesPerPrefixPerSecond need "
            "newConnectionsPerSecond (with it 0, key exchanges are not limited at all)");
    return;
  }
  Require(address <= rate,
          "keyExchangesPerAddressPerSecond must be at most newConnectionsPerSecond");
  Require(prefix <= rate, "keyExchangesPerPrefixPerSecond must be at most newConnectionsPerSecond");
  Require(address == 0 || prefix == 0 || address <= prefix,
          "keyExchangesPerAddressPerSecond must be at most keyExchangesPerPrefixPerSecond");
  if (address == 0) {
    address = std::max<std::size_t>(1, rate / 10);
    if (prefix != 0) address = std::min(address, prefix);
  }
  if (prefix == 0) prefix = std::max({std::size_t{1}, rate / 4, address});
}

}  // namespace

EndpointOptions ValidateOptions(EndpointOptions options) {
  Require(options.maxDatagramSize >= detail::kHelloSize &&
              options.maxDatagramSize <= detail::kMaxDatagramSize,
          "maxDatagramSize must be in [1200, 65507]");
  Require(options.maxMessageSize > 0 && options.maxMessageSize <= (std::size_t{1} << 30),
          "maxMessageSize must be in [1, 2^30]");
  if (options.receiveWindow == 0) {
    options.receiveWindow = std::max<std::size_t>(2 << 20, options.maxMessageSize + (64 << 10));
  }
  // A whole message must fit in the window: it is delivered only once complete.
  Require(options.receiveWindow >= options.maxMessageSize + 8,
          "receiveWindow must be at least maxMessageSize + 8");
  Require(AtMostMaxBytes(options.receiveWindow), "receiveWindow must be at most 2^40 bytes");
  // The defaults derived from the window meet their own minimums, so that an error never names
  // an option the caller did not set.
  if (options.sendBufferSize == 0) {
    options.sendBufferSize = std::max<std::size_t>(options.receiveWindow, 64);
  }
  Require(options.sendBufferSize >= 64 && AtMostMaxBytes(options.sendBufferSize),
          "sendBufferSize must be in [64, 2^40] bytes");
  Require(options.maxAckDelay >= 1 && options.maxAckDelay < 1000,
          "maxAckDelay must be in [1, 999] ms");
  Require(options.idleTimeout >= 100, "idleTimeout must be at least 100 ms");
  Require(options.keepaliveInterval >= 10 && options.keepaliveInterval < options.idleTimeout,
          "keepaliveInterval must be in [10 ms, idleTimeout)");
  Require(options.handshakeTimeout >= 100, "handshakeTimeout must be at least 100 ms");
  // At most ten minutes: finished handshakes are remembered for two windows (replay defence), up
  // to the new-connection rate times that, so the window bounds that table's memory.
  Require(options.cookieWindow >= 1000 && options.cookieWindow <= 600'000,
          "cookieWindow must be in [1000, 600000] ms");
  Require(options.timerGranularity >= 1 && options.timerGranularity <= options.maxAckDelay,
          "timerGranularity must be in [1, maxAckDelay] ms");
  Require(options.maxConnections >= 1, "maxConnections must be at least 1");
  if (options.maxReceiveMemoryPerConnection == 0) {
    options.maxReceiveMemoryPerConnection =
        std::max(options.receiveWindow, 2 * options.maxDatagramSize);
  }
  // Below one datagram's worth of chunks, out-of-order data could never be stored at all.
  Require(options.maxReceiveMemoryPerConnection >= 2 * options.maxDatagramSize &&
              AtMostMaxBytes(options.maxReceiveMemoryPerConnection),
          "maxReceiveMemoryPerConnection must be in [2 * maxDatagramSize, 2^40] bytes");
  Require(options.maxReceiveMemory >= 2 * options.maxDatagramSize &&
              options.maxReceiveMemory - 2 * options.maxDatagramSize >= options.receiveWindow,
          "maxReceiveMemory must be at least receiveWindow + 2 * maxDatagramSize");
  Require(!options.acceptIncoming || options.acceptBacklog >= 1,
          "acceptBacklog must be at least 1 when acceptIncoming is set");
  Require(options.congestionControl == CongestionControl::Bbr ||
              options.congestionControl == CongestionControl::NewReno ||
              options.congestionControl == CongestionControl::None,
          "congestionControl must be Bbr, NewReno or None");
  Require(options.timerQueue == TimerQueueKind::Wheel || options.timerQueue == TimerQueueKind::Heap,
          "timerQueue must be Wheel or Heap");
  Require(options.statelessRepliesPerSecond >= 1, "statelessRepliesPerSecond must be at least 1");
  FillKeyExchangeShares(options);
  Require(options.shards >= 1 && options.shards <= 64, "shards must be in [1, 64]");
  Require(options.socketReceiveBufferSize >= 1 && options.socketSendBufferSize >= 1,
          "socketReceiveBufferSize and socketSendBufferSize must be at least 1 byte");
  Require(options.clientToken.size() <= detail::kMaxClientTokenSize,
          "clientToken must be at most 512 bytes");
  const bool pinned = std::any_of(options.serverPublicKey.begin(), options.serverPublicKey.end(),
                                  [](std::uint8_t byte) { return byte != 0; });
  Require(options.clientToken.empty() || pinned,
          "clientToken needs serverPublicKey (it is sent only inside the sealed handshake)");
  if (pinned) {
    // A point of small order is no server's key, and its DH result is all zero whatever our
    // scalar: a handshake pinned to it would be sealed under keys made of public values alone.
    // Any scalar tells (libsodium refuses the point); this one is a constant, not a secret.
    detail::X25519Key scalar{};
    scalar.fill(0x5a);
    detail::X25519Key shared{};
    Require(detail::X25519(scalar, options.serverPublicKey, shared),
            "serverPublicKey is a point of small order: no server has it, and a handshake "
            "pinned to it would not be authenticated");
  }
  return options;
}

ServerKeyPair MakeServerKeyPair() {
  const detail::X25519KeyPair pair = detail::GenerateX25519KeyPair();
  ServerKeyPair result;
  result.secretKey = pair.secretKey;
  result.publicKey = pair.publicKey;
  return result;
}

}  // namespace timerwheel::rudp
