// What every UDP socket of this project needs from the OS, and how its receive loop survives a
// run of errors: shared by ReliableUDP's Endpoint and the impairment relay.
#pragma once

#include <algorithm>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <utility>

namespace timerwheel::udp {

// On Windows, turns off SIO_UDP_CONNRESET and SIO_UDP_NETRESET: otherwise an ICMP "port
// unreachable" or "TTL expired" caused by an earlier send fails the next receive on the socket
// (WSAECONNRESET, WSAENETRESET), so one vanished peer disturbs every other. Returns the first
// failure, with which option it was in `what` (SIO_UDP_NETRESET unknown to the stack, as under
// Wine, is no failure); the socket is usable either way (its receive loop counts those errors and
// re-arms). Elsewhere does nothing and returns no error.
struct IcmpReportsResult {
  boost::system::error_code error;
  const char* what = "";  // the option that failed
};
IcmpReportsResult DisableIcmpErrorReports(boost::asio::ip::udp::socket& socket);

// The socket's buffers as granted, in the units of the request (Linux doubles a request, to
// cover each datagram's bookkeeping, and reports the doubled figure; Asio halves it back).
struct SocketBufferSizes {
  int receive = 0;
  int send = 0;
};

// Asks for the buffers. Best effort: the OS may grant less, and that is no error. On Linux,
// where `net.core.rmem_max`/`wmem_max` cap an ordinary request (4 MiB here, 208 KiB by default),
// a request the cap cut short is made again with SO_RCVBUFFORCE/SO_SNDBUFFORCE, which a process
// with CAP_NET_ADMIN may make beyond the cap (as quic-go and wireguard-go do); without it that
// fails and the capped size stays. Returns what was granted.
SocketBufferSizes SetSocketBufferSizes(boost::asio::ip::udp::socket& socket, int receiveBytes,
                                       int sendBytes);

// Datagrams the OS dropped because the socket's receive buffer was full, since the socket was
// opened (Linux: SO_MEMINFO's drop count). 0 where the OS does not say (Windows).
std::uint64_t ReceiveBufferDrops(boost::asio::ip::udp::socket& socket);

// Re-arms a receive after an error: at once while errors are isolated (an ICMP report is one
// error for one datagram), then, while errors keep coming with no datagram in between, after a
// delay that doubles from 1 ms to 128 ms, so that a socket failing every receive does not spin a
// core. The re-arm always runs from the executor, never inside OnError: OnError is called from a
// receive handler that holds the socket's lock, and a re-arm takes that lock (called inline, it
// locked it a second time and hung: found in the relay). Not thread-safe: use it under the lock
// that guards the socket.
class ReceiveErrorBackoff {
 public:
  static constexpr unsigned kImmediateRetries = 8;  // consecutive errors re-armed at once
  static constexpr std::chrono::milliseconds kMaximumDelay{128};

  explicit ReceiveErrorBackoff(const boost::asio::ip::udp::socket::executor_type& executor)
      : m_timer(executor) {}

  // A datagram arrived: the next error counts as isolated again.
  void OnReceived() noexcept { m_consecutive = 0; }

  // A receive failed: posts rearm() to the executor, at once or after the back-off delay (a
  // delayed one not if Cancel ran first). rearm takes the socket's lock itself and must re-check
  // that the socket is still open.
  template <class Rearm>
  void OnError(Rearm&& rearm) {
    const unsigned consecutive = ++m_consecutive;
    if (consecutive <= kImmediateRetries) {
      boost::asio::post(m_timer.get_executor(), std::forward<Rearm>(rearm));
      return;
    }
    const unsigned doublings = (std::min)(consecutive - kImmediateRetries - 1, 7u);
    m_timer.expires_after(
        (std::min)(std::chrono::milliseconds(1) * (1u << doublings), kMaximumDelay));
    m_timer.async_wait([rearm = std::forward<Rearm>(rearm)](boost::system::error_code error) {
      if (!error) rearm();
    });
  }

  // On close: a delayed re-arm does not happen.
  void Cancel() noexcept {
    boost::system::error_code ignored;
    m_timer.cancel(ignored);
  }

  unsigned ConsecutiveErrors() const noexcept { return m_consecutive; }

 private:
  boost::asio::steady_timer m_timer;
  unsigned m_consecutive = 0;
};

}  // namespace timerwheel::udp
