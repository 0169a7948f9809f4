// The error category of ReliableUDP.
#include "ReliableUDP/Error.h"

#include <string>

namespace timerwheel::rudp {
namespace {

class Category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "timerwheel.rudp"; }
  std::string message(int value) const override {
    switch (static_cast<Error>(value)) {
      case Error::ClosedByPeer:
        return "connection closed by peer";
      case Error::ClosedLocally:
        return "connection closed";
      case Error::TimedOut:
        return "connection timed out";
      case Error::Aborted:
        return "connection aborted";
      case Error::AbortedByPeer:
        return "connection aborted by peer";
      case Error::ProtocolError:
        return "protocol error";
      case Error::EndpointClosed:
        return "endpoint closed";
      case Error::MessageTooLarge:
        return "message larger than the maximum message size";
      case Error::ConnectionLimit:
        return "endpoint has reached its maximum number of connections";
      case Error::ServerBusy:
        return "server refused the connection: busy";
      case Error::ConnectionReset:
        return "connection reset by peer (stateless reset)";
      case Error::AuthenticationFailed:
        return "authentication failed (of the server, or too many forged packets)";
    }
    return "unknown ReliableUDP error";
  }
};

}  // namespace

const boost::system::error_category& ErrorCategory() noexcept {
  static const Category category;
  return category;
}

}  // namespace timerwheel::rudp
