// What the latency and bulk workloads run over: each transport under test, and the impairment
// relay (on a thread of its own) in front of its server.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "Relay/ImpairmentRelay.h"
#include "Transport/ITransportUnderTest.h"

namespace timerwheel::perf {

class RelayThread {
 public:
  RelayThread(std::uint16_t upstreamPort, const relay::ImpairmentProfile& toServer,
              const relay::ImpairmentProfile& toClient, std::uint64_t seed)
      : m_work(m_io.get_executor()),
        m_relay(m_io,
                boost::asio::ip::udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), 0),
                boost::asio::ip::udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"),
                                               upstreamPort),
                toServer, toClient, seed),
        m_thread([this] { m_io.run(); }) {}
  ~RelayThread() {
    m_relay.Close();
    m_work.reset();
    m_thread.join();
  }
  std::uint16_t Port() const { return m_relay.LocalEndpoint().port(); }
  double CpuSeconds();
  relay::LinkCounters ToServer() const { return m_relay.ToUpstreamCounters(); }
  relay::LinkCounters ToClient() const { return m_relay.ToClientCounters(); }

 private:
  boost::asio::io_context m_io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> m_work;
  relay::ImpairmentRelay m_relay;
  std::thread m_thread;
};

// ReliableUdp: the default controller (Bbr); ReliableUdpNewReno and ReliableUdpKnownPath ask for
// the others (EndpointOptions::congestionControl).
enum class Kind { ReliableUdp, ReliableUdpNewReno, ReliableUdpKnownPath, Enet, Tcp };

// How a ReliableUDP row's endpoints are configured beyond the controller (--encrypt, --io); other
// transports ignore it.
struct ReliableUdpVariant {
  // The server gets a fresh key pair and the client pins it (issue 20).
  bool encrypted = false;
  // false: EndpointOptions::batchedIo off (one system call per datagram, no GSO/GRO), the path
  // before issue 19, to show that batching adds no latency.
  bool batched = true;
};

const char* KindName(Kind kind);
// The row's name: KindName, then ", encrypted" and ", one per call" for a ReliableUDP kind's
// variant.
std::string RowName(Kind kind, const ReliableUdpVariant& variant = {});
std::unique_ptr<ITransportUnderTest> MakeTransport(Kind kind,
                                                   const ReliableUdpVariant& variant = {});
bool IsReliableUdp(Kind kind);
// The relay's profile for one direction: 10 ms one way and `loss`.
relay::ImpairmentProfile PathProfile(double loss);

}  // namespace timerwheel::perf
