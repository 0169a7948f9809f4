#include "TransportBenchmark/Paths.h"

#include <boost/asio/ip/address_v4.hpp>

#include "ReliableUDP/EndpointOptions.h"
#include "Transport/EnetTransport.h"
#include "Transport/ReliableUdpTransport.h"
#include "Transport/TcpTransport.h"
#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {

double RelayThread::CpuSeconds() { return ThreadCpuSeconds(m_thread.native_handle()); }

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::ReliableUdp:
      return "ReliableUDP";
    case Kind::ReliableUdpNewReno:
      return "ReliableUDP NewReno";
    case Kind::ReliableUdpKnownPath:
      return "ReliableUDP known-path";
    case Kind::Enet:
      return "ENet";
    case Kind::Tcp:
      return "TCP (loopback, no relay)";
  }
  return "?";
}

std::unique_ptr<ITransportUnderTest> MakeTransport(Kind kind) {
  rudp::EndpointOptions options;
  switch (kind) {
    case Kind::ReliableUdp:
      return MakeReliableUdpTransport(options, KindName(kind));
    case Kind::ReliableUdpNewReno:
      options.congestionControl = rudp::CongestionControl::NewReno;
      return MakeReliableUdpTransport(options, KindName(kind));
    case Kind::ReliableUdpKnownPath:
      options.congestionControl = rudp::CongestionControl::None;
      return MakeReliableUdpTransport(options, KindName(kind));
    case Kind::Enet:
      return MakeEnetTransport();
    case Kind::Tcp:
      return MakeTcpTransport();
  }
  return nullptr;
}

relay::ImpairmentProfile PathProfile(double loss) {
  relay::ImpairmentProfile profile;
  profile.loss = loss;
  profile.delay = 10'000;  // 10 ms one way
  return profile;
}

}  // namespace timerwheel::perf
