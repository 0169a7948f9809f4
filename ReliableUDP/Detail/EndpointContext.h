// What every connection of one endpoint shares: I/O, timers, buffers, options, counters.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "ReliableUDP/Detail/Address.h"
#include "ReliableUDP/Detail/ChunkPool.h"
#include "ReliableUDP/Detail/ConnectionKeys.h"
#include "ReliableUDP/Detail/EngineError.h"
#include "ReliableUDP/Detail/KeySchedule.h"
#include "ReliableUDP/Detail/PacketProtection.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SipHash.h"
#include "ReliableUDP/Detail/StatelessReset.h"
#include "ReliableUDP/Detail/WireFormat.h"
#include "ReliableUDP/EndpointOptions.h"
#include "ReliableUDP/Statistics.h"
#include "ReliableUDP/UniqueFunction.h"
#include "TimerQueue/ITimer.h"
#include "TimerQueue/ITimerQueue.h"

namespace timerwheel::rudp::detail {

// An operation's completion handler as the engine holds it. Inline room for a public handler
// wrapped in an adapter that converts the EngineError (see UniqueFunction), so that queuing a send
// or a receive allocates nothing.
using Completion = UniqueFunction<void(EngineError), 96>;

// The protocol engine is sans-I/O: the endpoint supplies sending, the clock and a way to run
// completion handlers later. The Asio endpoint uses a socket and its io_context; tests use a
// simulated network and a manual clock.
class IEndpointIo {
 public:
  // Sends one datagram, or holds it (in order) until Flush or until the socket can take it.
  // Called from inside the engine, so under whatever lock the caller serialises the engine with.
  // May throw std::bad_alloc (no room to hold it): the engine counts that as a send error and
  // recovers it as a loss.
  virtual void SendDatagram(const Address& to, const std::uint8_t* data, std::size_t size) = 0;
  // The end of one call into the engine (one receive batch handled, one application call, one
  // timer expiry): sends that SendDatagram held back to batch them must go out, at once (Call) or,
  // after a timer expiry, once the other expiries of the same dispatch have run (TimerExpiry), so
  // that they batch too. The engine never calls it; whoever serialises calls into the engine
  // does, before releasing its lock (LockedEngine::Call). An I/O that sends at once ignores it.
  // Must not throw (it runs in LockedEngine::Call's destructor): what it cannot send now waits
  // for the next Flush.
  enum class BatchEnd { Call, TimerExpiry };
  virtual void Flush(BatchEnd) noexcept {}
  // Transport time, microseconds, monotonic. Now() / 1000 is the timer queue's tick count at the
  // same instant, so a timer armed for ceil(deadline / 1000) - Now() / 1000 ms never fires before
  // `deadline`.
  virtual Microseconds Now() const = 0;
  // Runs handler(error) later, never inside this call (user handlers never run inside the
  // engine, so never under the caller's lock). Takes `handler` only once nothing can fail: if
  // it throws (an allocation failed), `handler` is still the caller's, as it was, so that a
  // waiter taken from a queue can stay there.
  virtual void Post(Completion& handler, EngineError error) = 0;
  // The key behind what a peer must not predict (which packet numbers a connection skips).
  // Random by default; a simulation returns one derived from its seed, so that a run repeats.
  virtual SipHashKey SecretKey() { return RandomSipHashKey(); }

 protected:
  ~IEndpointIo() = default;
};

// Whether a peer's transport parameters are usable (from either handshake).
inline bool ParametersAreValid(const TransportParameters& parameters) {
  return parameters.maxDatagramSize >= kHelloSize &&
         parameters.maxDatagramSize <= kMaxDatagramSize && parameters.initialMaxData > 0 &&
         parameters.maxMessageSize > 0 && parameters.idleTimeoutMs > 0 &&
         parameters.maxAckDelayMs < (1u << 14);  // RFC 9000's limit for max_ack_delay
}

inline bool IsAllZero(const std::array<std::uint8_t, kX25519KeySize>& key) {
  std::uint8_t any = 0;
  for (std::uint8_t byte : key) any |= byte;
  return any == 0;
}

struct EndpointContext {
  EndpointContext(IEndpointIo& io_, ITimerQueue& timers_, ITimer& timerSink_,
                  Milliseconds timerGranularity_, const EndpointOptions& options_)
      : io(io_),
        timers(timers_),
        timerSink(timerSink_),
        timerGranularity(timerGranularity_),
        maxTimerTimeout(timers_.GetMaximumTimeout()),
        options(options_),
        receivePool(kReceiveChunkSize),
        connectionIds(RandomSipHashKey()),
        secrets(io_.SecretKey()),
        resetTokens(options_.statelessResetKey),
        datagram(options_.maxDatagramSize),
        opened((std::max)(options_.maxDatagramSize, kHelloSize)) {
    hasServerKey = !IsAllZero(options.serverSecretKey);
    if (hasServerKey) {
      serverKey.secretKey = options.serverSecretKey;
      serverKey.publicKey = X25519PublicKey(serverKey.secretKey);
    }
    pinsServerKey = !IsAllZero(options.serverPublicKey);
    if ((hasServerKey || pinsServerKey) && options.allowAes256Gcm) {
      aes256GcmAvailable = Aes256GcmAvailable();
    }
  }

  // Finishes the datagram `writer` built and sends it. Every datagram goes out through here, so
  // the endpoint's counters see all of them. Returns its size.
  std::size_t Send(const Address& to, PacketWriter& writer) {
    const std::size_t size = writer.Finish();
    ++stats.datagramsSent;
    stats.bytesSent += size;
    try {
      io.SendDatagram(to, writer.Data(), size);
    } catch (const std::bad_alloc&) {
      // Nowhere to hold it: a datagram lost before it left. The packet was (or will be) recorded
      // as sent, so loss recovery resends what it carried, as for a loss on the path.
      ++stats.sendErrors;
    }
    return size;
  }

  IEndpointIo& io;
  ITimerQueue& timers;
  ITimer& timerSink;  // the endpoint: one ITimer for every connection's timers
  Milliseconds timerGranularity;
  // timers.GetMaximumTimeout(), fixed for the queue's life: asked once, not by a virtual call
  // at every arm.
  Milliseconds maxTimerTimeout;
  EndpointOptions options;  // validated
  ChunkPool pool;           // send buffers: 16 KiB chunks, filled densely by the application
  // Receive buffers: small chunks, so that memory follows the bytes a peer actually got stored
  // (a 16 KiB chunk per one-byte out-of-order frame let a peer pin 1 MB per connection).
  static constexpr std::size_t kReceiveChunkSize = 1024;
  ChunkPool receivePool;
  ConnectionIdGenerator connectionIds;
  ConnectionIdGenerator secrets;     // unpredictable seeds (PacketNumberSkipper), not IDs
  StatelessResetTokens resetTokens;  // of our connection IDs, from the endpoint's secret
  EndpointStatistics stats;
  // Scratch space shared by all connections (the engine is never entered twice at once): a datagram
  // buffer per connection would cost every idle connection maxDatagramSize (1.2 KB by default).
  std::vector<std::uint8_t> datagram;   // one outgoing datagram being built
  std::vector<std::uint8_t> discarded;  // messages nobody will read (handle dropped)
  // A sealed datagram is copied here and opened in place (the received one is const).
  std::vector<std::uint8_t> opened;

  // Encryption (options.serverSecretKey, options.serverPublicKey).
  bool hasServerKey = false;        // a server that accepts only encrypted connections
  X25519KeyPair serverKey;          // ... its static key pair
  bool pinsServerKey = false;       // a client that connects only with the keyed handshake
  bool aes256GcmAvailable = false;  // this end allows AES-256-GCM and its CPU has it
  // Packets sealed under one key before a key update. Not an option: far below the AEADs'
  // limits by default; tests lower it to see updates (and reordering across them) happen.
  std::uint64_t packetsPerKey = ConnectionKeys::kDefaultPacketsPerKey;
  // Packets failing authentication that end an encrypted connection (ConnectionKeys: 0, the
  // AEAD's integrity limit, 2^36 or 2^52). Not an option: tests lower it to reach it.
  std::uint64_t integrityLimit = 0;
};

}  // namespace timerwheel::rudp::detail
