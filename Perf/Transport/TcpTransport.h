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
std::unique_ptr<ITransportUnderTest> MakeTcpTransport();

}  // namespace timerwheel::perf
