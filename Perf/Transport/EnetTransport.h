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
std::unique_ptr<ITransportUnderTest> MakeEnetTransport();

}  // namespace timerwheel::perf
