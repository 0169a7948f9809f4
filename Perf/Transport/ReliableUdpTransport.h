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
std::unique_ptr<ITransportUnderTest> MakeReliableUdpTransport(rudp::EndpointOptions options,
                                                              std::string name);

}  // namespace timerwheel::perf
