// What every connection of one endpoint shares: I/O, timers, buffers, options, counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/Address.h"
#include "ReliableUDP/Detail/ChunkPool.h"
#include "ReliableUDP/Detail/EngineError.h"
#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/SipHash.h"
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
  virtual void SendDatagram(const Address& to, const std::uint8_t* data, std::size_t size) = 0;
  // The end of one call into the engine (one receive batch handled, one application call, one
  // timer expiry): sends that SendDatagram held back to batch them must go out, at once (Call) or,
  // after a timer expiry, once the other expiries of the same dispatch have run (TimerExpiry), so
  // that they batch too. The engine never calls it; whoever serialises calls into the engine
  // does, before releasing its lock (LockedEngine::Call). An I/O that sends at once ignores it.
  enum class BatchEnd { Call, TimerExpiry };
  virtual void Flush(BatchEnd) {}
  // Transport time, microseconds, monotonic. Now() / 1000 is the timer queue's tick count at the
  // same instant, so a timer armed for ceil(deadline / 1000) - Now() / 1000 ms never fires before
  // `deadline`.
  virtual Microseconds Now() const = 0;
  // Runs handler(error) later, never inside this call (user handlers never run inside the
  // engine, so never under the caller's lock).
  virtual void Post(Completion handler, EngineError error) = 0;

 protected:
  ~IEndpointIo() = default;
};

struct EndpointContext {
  EndpointContext(IEndpointIo& io_, ITimerQueue& timers_, ITimer& timerSink_,
                  Milliseconds timerGranularity_, const EndpointOptions& options_)
      : io(io_),
        timers(timers_),
        timerSink(timerSink_),
        timerGranularity(timerGranularity_),
        options(options_),
        connectionIds(RandomSipHashKey()),
        datagram(options_.maxDatagramSize) {}

  // Finishes the datagram `writer` built and sends it. Every datagram goes out through here, so
  // the endpoint's counters see all of them. Returns its size.
  std::size_t Send(const Address& to, PacketWriter& writer) {
    const std::size_t size = writer.Finish();
    ++stats.datagramsSent;
    stats.bytesSent += size;
    io.SendDatagram(to, writer.Data(), size);
    return size;
  }

  IEndpointIo& io;
  ITimerQueue& timers;
  ITimer& timerSink;  // the endpoint: one ITimer for every connection's timers
  Milliseconds timerGranularity;
  EndpointOptions options;  // validated
  ChunkPool pool;
  ConnectionIdGenerator connectionIds;
  EndpointStatistics stats;
  // Scratch space shared by all connections (the engine is never entered twice at once): a datagram
  // buffer per connection would cost every idle connection maxDatagramSize (1.2 KB by default).
  std::vector<std::uint8_t> datagram;   // one outgoing datagram being built
  std::vector<std::uint8_t> discarded;  // messages nobody will read (handle dropped)
};

}  // namespace timerwheel::rudp::detail
