// Connection: one reliable, ordered, message-oriented conversation with a peer.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "ReliableUDP/Error.h"
#include "ReliableUDP/Statistics.h"
#include "ReliableUDP/UniqueFunction.h"

namespace timerwheel::rudp {
namespace detail {
class LockedEngine;
class ConnectionCore;
}  // namespace detail

// Obtained from Endpoint::AsyncConnect or Endpoint::AsyncAccept, always as a shared_ptr.
//
// Messages keep their boundaries, arrive exactly once and in the order they were sent, or the
// connection ends and says why: every pending and later operation completes with the end reason
// (an Error: ClosedByPeer, ClosedLocally, TimedOut, Aborted, AbortedByPeer, ProtocolError,
// EndpointClosed). After ClosedByPeer, messages already received are still delivered first.
//
// Handlers: each is called exactly once, on the endpoint's io_context (never from inside the
// call that started the operation). Accepted operations of one kind complete in the order they
// were started; an AsyncSend refused at once (MessageTooLarge, or after Close) completes at once,
// possibly before earlier sends still waiting for buffer space. If an allocation fails before the
// operation is queued (or, for one refused at once, before its completion is posted), the call
// throws std::bad_alloc, changes nothing, and the handler is not called: it is destroyed once the
// call holds no lock, so it may hold the last reference to this Connection. Once the operation
// is queued the call does not throw. Thread safety: every method may be called from any thread.
//
// Lifetime: destroying the last shared_ptr closes gracefully (like Close()); its pending
// receives then complete with operation_aborted and later messages are discarded. Buffers passed
// to AsyncSend and vectors passed to AsyncReceive must stay valid until their handler runs.
class Connection {
 public:
  using Handler = UniqueFunction<void(boost::system::error_code)>;

  // Queues `message` (0 bytes to the maximum message size). The handler runs once the whole
  // message has been copied into the send buffer: the buffer may then be reused. A message
  // larger than the maximum fails with Error::MessageTooLarge and nothing is sent. When the send
  // buffer is full (the peer reads slowly or the path is slow) the handler waits: back-pressure.
  void AsyncSend(boost::asio::const_buffer message, Handler handler);

  // Completes with the next message in `message` (resized; its capacity is reused).
  void AsyncReceive(std::vector<std::uint8_t>& message, Handler handler);

  // Completes with the end reason once the connection has ended.
  void AsyncWaitClosed(Handler handler);

  // Graceful: sends everything already queued, waits for it to be acknowledged, then closes;
  // AsyncWaitClosed completes with ClosedLocally (or TimedOut if the peer has vanished).
  // AsyncSend after Close fails with ClosedLocally.
  void Close();
  // At once: queued data is discarded, the peer is told (best effort), operations fail with
  // Aborted.
  void Abort();

  ConnectionStatistics GetStatistics() const;
  boost::asio::ip::udp::endpoint RemoteEndpoint() const;
  // Server side of an encrypted connection: the token the client sent sealed in its handshake
  // (EndpointOptions::clientToken), for the accept handler to check. Empty: none (always, on a
  // plaintext connection or the client side).
  std::vector<std::uint8_t> ClientToken() const;

  // For the endpoint only: the handle of a connection the engine opened. Null if it cannot be
  // made (an allocation failed: the handler then gets boost::asio::error::no_memory); the
  // connection is then closed as the end of its last handle would close it, rather than left
  // open with nobody to close it.
  static std::shared_ptr<Connection> Make(const std::shared_ptr<detail::LockedEngine>& engine,
                                          const std::shared_ptr<detail::ConnectionCore>& state);
  Connection(std::shared_ptr<detail::LockedEngine> engine,
             std::shared_ptr<detail::ConnectionCore> state);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

 private:
  std::shared_ptr<detail::LockedEngine> m_engine;
  std::shared_ptr<detail::ConnectionCore> m_state;
};

}  // namespace timerwheel::rudp
