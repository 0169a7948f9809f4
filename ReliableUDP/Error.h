// Error codes of ReliableUDP operations, and the reasons a connection ends.
#pragma once

#include <boost/system/error_code.hpp>
#include <type_traits>

namespace timerwheel::rudp {

enum class Error {
  // Why a connection ended (every connection ends with exactly one of these).
  ClosedByPeer = 1,  // the peer closed gracefully; everything it sent was delivered
  ClosedLocally,     // Close() completed: everything sent before it was acknowledged
  TimedOut,        // nothing heard from the peer for the idle timeout (or the handshake timed out)
  Aborted,         // Abort() was called, or the connection was dropped without a graceful close
  AbortedByPeer,   // the peer aborted
  ProtocolError,   // the peer broke the protocol (e.g. flow control, an ACK of an unsent packet)
  EndpointClosed,  // the endpoint was closed or destroyed
  // Operation errors (nothing changed).
  MessageTooLarge,  // AsyncSend of a message over the maximum message size
  ConnectionLimit,  // AsyncConnect with the endpoint at its maximum number of connections
  // AsyncConnect: the server refused the connection (full, or over a per-address, per-prefix or
  // rate limit). Try later, or another server.
  ServerBusy,
  // Why a connection ended: the peer no longer knows it (it restarted or dropped its state) and
  // said so with a stateless reset carrying the token of this connection.
  ConnectionReset,
  // AsyncConnect: the server could not be authenticated. The client pinned a server key and the
  // server did not prove it holds the matching secret key (another key, a tampered or replayed
  // handshake, or a plaintext server: no downgrade); or the server requires encryption and the
  // client pinned no key. Also why an encrypted connection ended: so many packets failed
  // authentication (forgeries, whoever sent them) that the AEAD's integrity limit was reached
  // (RFC 9001 6.6: 2^36 for ChaCha20-Poly1305, 2^52 for AES-256-GCM), past which a forgery
  // could no longer be ruled out; the peer sees AbortedByPeer.
  AuthenticationFailed,
};

const boost::system::error_category& ErrorCategory() noexcept;

inline boost::system::error_code make_error_code(Error error) noexcept {  // NOLINT: ADL name
  return {static_cast<int>(error), ErrorCategory()};
}

}  // namespace timerwheel::rudp

namespace boost::system {
template <>
struct is_error_code_enum<timerwheel::rudp::Error> : std::true_type {};
}  // namespace boost::system
