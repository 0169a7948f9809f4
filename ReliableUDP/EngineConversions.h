// Between the engine's own types and Asio's: addresses and error codes (for Endpoint, Connection
// and the tests' simulated network).
#pragma once

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>

#include "ReliableUDP/Detail/Address.h"
#include "ReliableUDP/Detail/EngineError.h"
#include "ReliableUDP/Error.h"

namespace timerwheel::rudp::detail {

static_assert(static_cast<int>(EngineError::ClosedByPeer) ==
                      static_cast<int>(Error::ClosedByPeer) &&
                  static_cast<int>(EngineError::AuthenticationFailed) ==
                      static_cast<int>(Error::AuthenticationFailed) &&
                  static_cast<int>(EngineError::AuthenticationFailed) -
                          static_cast<int>(EngineError::ClosedByPeer) ==
                      static_cast<int>(Error::AuthenticationFailed) -
                          static_cast<int>(Error::ClosedByPeer),
              "EngineError's values 1..12 are rudp::Error's");

inline boost::system::error_code ToErrorCode(EngineError error) noexcept {
  switch (error) {
    case EngineError::None:
      return {};
    case EngineError::OperationAborted:
      return boost::asio::error::operation_aborted;
    default:
      return make_error_code(static_cast<Error>(error));
  }
}

inline Address ToAddress(const boost::asio::ip::udp::endpoint& endpoint) {
  Address address;
  address.port = endpoint.port();
  const auto ip = endpoint.address();
  if (ip.is_v4()) {
    const auto bytes = ip.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), address.bytes.begin());
  } else {
    const auto v6 = ip.to_v6();
    const auto bytes = v6.to_bytes();
    std::copy(bytes.begin(), bytes.end(), address.bytes.begin());
    address.family = Address::Family::V6;
    address.scopeId = static_cast<std::uint32_t>(v6.scope_id());
  }
  return address;
}

inline boost::asio::ip::udp::endpoint ToUdpEndpoint(const Address& address) {
  if (address.family == Address::Family::V4) {
    boost::asio::ip::address_v4::bytes_type bytes;
    std::copy(address.bytes.begin(), address.bytes.begin() + bytes.size(), bytes.begin());
    return {boost::asio::ip::address_v4(bytes), address.port};
  }
  boost::asio::ip::address_v6::bytes_type bytes;
  std::copy(address.bytes.begin(), address.bytes.end(), bytes.begin());
  return {boost::asio::ip::address_v6(bytes, address.scopeId), address.port};
}

}  // namespace timerwheel::rudp::detail
