// Endpoint: one UDP socket on a boost::asio::io_context carrying many ReliableUDP connections.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/system/error_code.hpp>
#include <memory>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/EndpointOptions.h"
#include "ReliableUDP/Statistics.h"

namespace timerwheel::rudp {

// A client, a server or both: AsyncConnect opens connections to other endpoints; with
// options.acceptIncoming, AsyncAccept hands over connections other endpoints opened.
//
// I/O: datagrams are received and sent on the io_context (IOCP on Windows, epoll on Linux); it
// may be run by one thread or several. Every connection's timers (loss detection, delayed ACK,
// pacing, keepalive, idle) are timers of one ITimerQueue owned by the endpoint, a TimerWheel or
// a TimerQueue as options.timerQueue says, driven by an AsioTimerQueue on the same io_context.
// On Windows the socket ignores ICMP port-unreachable (SIO_UDP_CONNRESET off, and a
// connection_reset on receive is counted and skipped), so one vanished client cannot stop it.
//
// Handlers run on the io_context, never inside the call that started the operation.
// Thread safety: every method may be called from any thread.
// Lifetime: destroy the endpoint before its io_context. Destroying it (or Close) ends every
// connection with Error::EndpointClosed; Connection objects may outlive it (their operations
// then fail with that error) as long as the io_context lives.
class Endpoint {
 public:
  using ConnectHandler =
      UniqueFunction<void(boost::system::error_code, std::shared_ptr<Connection>)>;

  // Binds `local` (port 0: any free port). Throws std::invalid_argument for bad options (see
  // ValidateOptions) and boost::system::system_error if the socket cannot be opened or bound.
  Endpoint(boost::asio::io_context& ioContext, const boost::asio::ip::udp::endpoint& local,
           EndpointOptions options = {});
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  boost::asio::ip::udp::endpoint LocalEndpoint() const;

  // Completes with a Connection once the handshake is done, or with TimedOut after
  // options.handshakeTimeout, EndpointClosed, ConnectionLimit, ServerBusy (the server refused:
  // full, or over an admission limit), or AuthenticationFailed (options.serverPublicKey is set
  // and the server did not prove it holds its secret key; or the server requires encryption).
  // Either completes with boost::asio::error::no_memory, and no connection, if the connection's
  // handle could not be allocated (the connection is closed). If an allocation fails while the
  // connection is being opened, AsyncConnect throws std::bad_alloc and the endpoint is as before
  // (the handler is not called); on the server, the handshake's datagram is dropped as if lost
  // (EndpointStatistics::droppedOutOfMemory), and the client's retry may open it.
  void AsyncConnect(const boost::asio::ip::udp::endpoint& remote, ConnectHandler handler);
  // Completes with the next connection another endpoint opened (requires acceptIncoming), or
  // with EndpointClosed. If the handler cannot be queued (no memory), AsyncAccept throws
  // std::bad_alloc and the handler is not called. Either call destroys a handler it did not take
  // only once it holds none of the endpoint's locks: it may hold the last reference to a
  // Connection.
  void AsyncAccept(ConnectHandler handler);

  // Ends every connection (EndpointClosed), fails pending connects and accepts, closes the
  // socket and stops the timers. Idempotent; the destructor calls it. If a shard cannot post
  // the completion of an operation it ends (its queue of completions cannot grow), Close throws
  // std::bad_alloc before the socket closes; each call goes on from where the last stopped, so
  // calling it again finishes (in the destructor, a failure there ends the process). Failing the
  // accept waiters needs no memory: each is called once, with EndpointClosed.
  void Close();

  EndpointStatistics GetStatistics() const;

 private:
  class Impl;  // the socket, clock, timers and engine (Endpoint.cpp)
  std::shared_ptr<Impl> m_impl;
};

}  // namespace timerwheel::rudp
