// TCP over loopback (Boost.Asio) as a transport under test: the baseline the UDP transports face.
#pragma once

#include <memory>
#include <string>

#include "Transport/ITransportUnderTest.h"

namespace timerwheel::perf {

// A server that accepts one connection and a client, each on its own io_context run by one
// thread. Messages are framed as a 4-byte big-endian length followed by the bytes. TCP_NODELAY
// is on: the latency workload sends 64-byte messages 100 times a second, and Nagle's algorithm
// would hold each one back until the previous one is acknowledged.
class TcpTransport final : public ITransportUnderTest {
 public:
  TcpTransport();
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  std::string Name() const override;
  std::uint16_t StartServer(MessageHandler onMessage) override;
  void Connect(std::uint16_t port) override;
  bool Send(const std::uint8_t* data, std::size_t size) override;
  bool Flush(int timeoutMs) override;
  // wireBytesSent counts bytes written to the socket, framing included (TCP/IP headers are not
  // seen from user space). packetsSent is 0, as the interface defines for TCP; retransmissions is
  // 0 because the kernel's count is not read (getsockopt TCP_INFO would give it; on loopback it
  // is rarely anything but 0).
  TransportCounters ClientCounters() override;
  void Stop() override;

 private:
  // Keeps Boost.Asio out of the benchmark's translation units.
  class Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace timerwheel::perf
