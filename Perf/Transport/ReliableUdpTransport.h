// ReliableUDP (timerwheel::rudp::Endpoint and Connection) as a transport under test.
#pragma once

#include <memory>
#include <string>

#include "ReliableUDP/EndpointOptions.h"
#include "Transport/ITransportUnderTest.h"

namespace timerwheel::perf {

// A server endpoint and a client endpoint, each on its own io_context run by one thread. The
// same options configure both (the server's get acceptIncoming = true), so one adapter class
// covers the NewReno profile and the known-path profile under different display names.
class ReliableUdpTransport final : public ITransportUnderTest {
 public:
  ReliableUdpTransport(rudp::EndpointOptions options, std::string name);
  ~ReliableUdpTransport() override;
  ReliableUdpTransport(const ReliableUdpTransport&) = delete;
  ReliableUdpTransport& operator=(const ReliableUdpTransport&) = delete;

  std::string Name() const override;
  std::uint16_t StartServer(MessageHandler onMessage) override;
  void Connect(std::uint16_t port) override;
  bool Send(const std::uint8_t* data, std::size_t size) override;
  bool Flush(int timeoutMs) override;
  TransportCounters ClientCounters() override;
  void Stop() override;

 private:
  // Keeps Boost.Asio and the ReliableUDP headers' dependencies out of the benchmark's
  // translation units.
  class Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace timerwheel::perf
