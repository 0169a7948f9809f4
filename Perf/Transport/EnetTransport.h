// ENet 1.3 (reliable packets on one channel) as a transport under test.
#pragma once

#include <memory>
#include <string>

#include "Transport/ITransportUnderTest.h"

namespace timerwheel::perf {

// An ENet server host and client host, each serviced by its own thread: ENet is not
// thread-safe, so every call on a host is made on that host's thread, and Send hands packets
// over through a queue. See EnetTransport.cpp for the ENet settings and how the counters are
// obtained.
class EnetTransport final : public ITransportUnderTest {
 public:
  EnetTransport();
  ~EnetTransport() override;
  EnetTransport(const EnetTransport&) = delete;
  EnetTransport& operator=(const EnetTransport&) = delete;

  std::string Name() const override;
  std::uint16_t StartServer(MessageHandler onMessage) override;
  void Connect(std::uint16_t port) override;
  bool Send(const std::uint8_t* data, std::size_t size) override;
  bool Flush(int timeoutMs) override;
  // wireBytesSent and packetsSent: the client host's totalSentData and totalSentPackets.
  // retransmissions: reliable commands (whole messages or fragments) ENet resent after their
  // timeout, from peer->packetsLost; a datagram may carry several. spuriousRetransmissions: -1.
  TransportCounters ClientCounters() override;
  void Stop() override;

 private:
  // Keeps <enet/enet.h> out of the benchmark's translation units.
  class Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace timerwheel::perf
