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

std::string RowName(Kind kind, const ReliableUdpVariant& variant) {
  std::string name = KindName(kind);
  if (!IsReliableUdp(kind)) return name;
  if (variant.encrypted) name += " encrypted";
  if (!variant.batched) name += " one per call";
  return name;
}

bool IsReliableUdp(Kind kind) {
  return kind == Kind::ReliableUdp || kind == Kind::ReliableUdpNewReno ||
         kind == Kind::ReliableUdpKnownPath;
}

std::unique_ptr<ITransportUnderTest> MakeTransport(Kind kind, const ReliableUdpVariant& variant) {
  rudp::EndpointOptions options;
  options.batchedIo = variant.batched;
  if (variant.encrypted && IsReliableUdp(kind)) {
    // Both ends share the options: the server uses the secret key, the client pins the public.
    const rudp::ServerKeyPair key = rudp::MakeServerKeyPair();
    options.serverSecretKey = key.secretKey;
    options.serverPublicKey = key.publicKey;
  }
  const std::string name = RowName(kind, variant);
  switch (kind) {
    case Kind::ReliableUdp:
      return MakeReliableUdpTransport(options, name);
    case Kind::ReliableUdpNewReno:
      options.congestionControl = rudp::CongestionControl::NewReno;
      return MakeReliableUdpTransport(options, name);
    case Kind::ReliableUdpKnownPath:
      options.congestionControl = rudp::CongestionControl::None;
      return MakeReliableUdpTransport(options, name);
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
