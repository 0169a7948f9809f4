// Uses an installed TimerWheel: sets a timer on each queue and checks that it is pending; with
// ReliableUDP, also opens an endpoint on 127.0.0.1 (port 0: any free port) and closes it.
#include <cstdio>

#include "TimerQueue/ITimer.h"
#include "TimerQueue/TimerQueue.h"
#ifdef CONSUMER_HAS_TIMERWHEEL
#include "TimerWheel/TimerWheel.h"
#endif
#ifdef CONSUMER_HAS_RELIABLEUDP
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/udp.hpp>
#include <exception>

#include "ReliableUDP/Endpoint.h"
#endif

namespace {

struct NoOpTimer : timerwheel::ITimer {
  void OnTimer(timerwheel::UserData) override {}
};

// Returns true when a timer set on `queue` reports itself pending.
template <typename Queue>
bool SetTimerIsPending(Queue& queue, const char* name) {
  NoOpTimer timer;
  timerwheel::TimerHandle handle = queue.CreateTimer();
  queue.SetTimer(handle, timer, 1000, 42);
  const bool pending = queue.TimerIsSet(handle);
  queue.DestroyTimer(handle);
  std::printf("%s: timer %s\n", name, pending ? "pending" : "NOT pending");
  return pending;
}

#ifdef CONSUMER_HAS_RELIABLEUDP
// Returns true when an Endpoint binds to 127.0.0.1 and reports the port it got.
bool OpenReliableUdpEndpoint() {
  try {
    boost::asio::io_context ioContext;
    const boost::asio::ip::udp::endpoint local(boost::asio::ip::address_v4::loopback(), 0);
    timerwheel::rudp::Endpoint endpoint(ioContext, local);
    const unsigned short port = endpoint.LocalEndpoint().port();
    endpoint.Close();
    ioContext.poll();
    std::printf("ReliableUDP: endpoint bound to 127.0.0.1:%u\n", static_cast<unsigned>(port));
    return port != 0;
  } catch (const std::exception& error) {
    std::printf("ReliableUDP: FAILED: %s\n", error.what());
    return false;
  }
}
#endif

}  // namespace

int main() {
  bool ok = true;
  timerwheel::TimerQueue heap;  // default construction: the system tick provider
  ok = SetTimerIsPending(heap, "TimerQueue") && ok;
#ifdef CONSUMER_HAS_TIMERWHEEL
  timerwheel::TimerWheel wheel;
  ok = SetTimerIsPending(wheel, "TimerWheel") && ok;
#endif
#ifdef CONSUMER_HAS_RELIABLEUDP
  ok = OpenReliableUdpEndpoint() && ok;
#endif
  std::printf("consumer: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
