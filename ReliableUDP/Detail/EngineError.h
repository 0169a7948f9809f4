// How an engine operation ended, without an error-code library: the I/O layer maps these to
// rudp::Error (same values) and to its own "operation aborted".
#pragma once

#include <cstdint>

namespace timerwheel::rudp::detail {

// Values 1..12 equal rudp::Error's (Error.h says what each means); the public layer checks that at
// compile time. None is success; OperationAborted is the one outcome that is not a rudp::Error.
enum class EngineError : std::uint8_t {
  None = 0,
  ClosedByPeer = 1,
  ClosedLocally,
  TimedOut,
  Aborted,
  AbortedByPeer,
  ProtocolError,
  EndpointClosed,
  MessageTooLarge,
  ConnectionLimit,
  ServerBusy,
  ConnectionReset,
  AuthenticationFailed,
  // A receive cancelled because the application dropped its last handle (its buffer may be
  // gone): boost::asio::error::operation_aborted to the application.
  OperationAborted,
};

}  // namespace timerwheel::rudp::detail
