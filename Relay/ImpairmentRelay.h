// ImpairmentRelay: a UDP relay between clients and one upstream server that impairs each
// direction (loss, burst loss, delay, jitter, reordering, duplication, corruption, a rate cap
// with a drop-tail queue), seeded and reproducible. netem without the kernel.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "Relay/ImpairmentProfile.h"

namespace timerwheel::relay {

// Clients send to LocalEndpoint(). For each distinct client address the relay opens one socket
// of its own (an ephemeral port, connected to the upstream) and forwards that client's datagrams
// through it; what the upstream sends to that socket goes back to the client from the listening
// socket. Client sockets live until Close.
//
// Each direction has its own LinkModel (Detail/LinkModel.h; toUpstream seeded with `seed`,
// toClient with `~seed`), a queue of datagrams ordered by delivery time and one steady_timer
// aimed at the earliest; deliveries already due when decided are sent at once. Decisions are
// reproducible for the same seed and the same order of arrivals (and, with a rate cap, the same
// arrival times); with several clients the order in which their datagrams arrive is the OS's.
//
// A receive error (an ICMP port unreachable reported as connection_refused or connection_reset,
// ...) is counted (receiveErrors) and the socket keeps receiving; on Windows the sockets have
// SIO_UDP_CONNRESET off. A send the socket refuses at once (would block, no route) is counted in
// sendErrors and the datagram is lost.
//
// Thread safety: every method may be called from any thread; the io_context may be run by one
// thread or several. Lifetime: destroy the relay (or Close it) before the io_context.
class ImpairmentRelay {
 public:
  using Endpoint = boost::asio::ip::udp::endpoint;

  // Binds `listen` (port 0: any free port). Throws std::invalid_argument for an invalid profile
  // (ImpairmentProfile::Validate) and boost::system::system_error if the socket cannot be bound.
  ImpairmentRelay(boost::asio::io_context& ioContext, const Endpoint& listen,
                  const Endpoint& upstream, const ImpairmentProfile& toUpstream,
                  const ImpairmentProfile& toClient, std::uint64_t seed);
  ~ImpairmentRelay();  // NOLINT(bugprone-exception-escape): see the definition
  ImpairmentRelay(const ImpairmentRelay&) = delete;
  ImpairmentRelay& operator=(const ImpairmentRelay&) = delete;

  Endpoint LocalEndpoint() const;

  // Snapshots.
  LinkCounters ToUpstreamCounters() const;
  LinkCounters ToClientCounters() const;
  std::size_t ClientCount() const;

  // Applies to datagrams arriving afterwards (those already decided keep their fate). Throws
  // std::invalid_argument, changing nothing, if either profile is invalid.
  void SetProfiles(const ImpairmentProfile& toUpstream, const ImpairmentProfile& toClient);

  // Waits until `done(toUpstream, toClient)` holds, re-evaluated under the relay's lock after
  // every datagram received or sent; false on timeout. `done` must not call the relay.
  bool WaitForCounters(
      const std::function<bool(const LinkCounters& toUpstream, const LinkCounters& toClient)>& done,
      std::chrono::milliseconds timeout) const;

  // Closes every socket and drops the datagrams still waiting; after it nothing is sent and the
  // handlers still pending touch nothing. Idempotent; the destructor calls it. The counters stay
  // readable.
  void Close();

 private:
  class State;
  std::shared_ptr<State> m_state;
};

}  // namespace timerwheel::relay
