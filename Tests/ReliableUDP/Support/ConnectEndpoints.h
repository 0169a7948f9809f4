// Opens one connection between two real endpoints, for loopback and relay tests.
#pragma once

#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <utility>

#include "ReliableUDP/Endpoint.h"

namespace timerwheel::test {

// Accepts on `server` and connects `client` to `remote` (the server itself, or a relay in front
// of it). Returns {client side, server side}; a side that failed or did not complete within
// `timeout` is null. The promises are shared with the handlers, so a late handler is harmless.
inline std::pair<std::shared_ptr<rudp::Connection>, std::shared_ptr<rudp::Connection>>
ConnectEndpoints(rudp::Endpoint& client, rudp::Endpoint& server,
                 const boost::asio::ip::udp::endpoint& remote, std::chrono::seconds timeout) {
  using Promise = std::promise<std::shared_ptr<rudp::Connection>>;
  auto accepted = std::make_shared<Promise>();
  auto connected = std::make_shared<Promise>();
  auto acceptedFuture = accepted->get_future();
  auto connectedFuture = connected->get_future();
  server.AsyncAccept(
      [accepted](boost::system::error_code ec, std::shared_ptr<rudp::Connection> connection) {
        accepted->set_value(ec ? nullptr : std::move(connection));
      });
  client.AsyncConnect(
      remote, [connected](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
        connected->set_value(ec ? nullptr : std::move(c));
      });
  std::pair<std::shared_ptr<rudp::Connection>, std::shared_ptr<rudp::Connection>> sides;
  if (connectedFuture.wait_for(timeout) == std::future_status::ready)
    sides.first = connectedFuture.get();
  if (acceptedFuture.wait_for(timeout) == std::future_status::ready)
    sides.second = acceptedFuture.get();
  return sides;
}

}  // namespace timerwheel::test
