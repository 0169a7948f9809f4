// A wait for a UDP socket to become readable again after a read that drained it, without the
// system call Asio's own wait makes every time it starts.
//
// Why: Boost 1.74's epoll reactor registers a socket once, edge-triggered, but starts every
// `async_wait` with an `epoll_ctl(EPOLL_CTL_MOD)` (a wait is never "speculative"). On the batched
// receive path that is one system call per wake-up beside the `epoll_wait` and the `recvmmsg`
// (Perf/RESULTS.md, "Session 41": about 1.25 us a call on the project's machine, at 1.5 datagrams
// a wake-up). This wait is a reactor operation of its own, started like Asio's receives (which
// need no re-arm: they try the socket first), whose "attempt" reads nothing and reports the
// socket exhausted. So:
// - the reactor runs it, and completes it, when the socket signals readable (an edge: a datagram
//   arrived since the reactor last looked); its caller then reads with recvmmsg;
// - reporting "exhausted" clears the reactor's note that the socket may be readable, until the
//   next edge, so the next wait started after a draining read parks at once, with no system call;
// - an edge the reactor took while no wait was in flight (a datagram that came during the read
//   or the hand-over) left that note set, and then the next wait completes at once: the caller
//   reads again and finds the datagram, or nothing (one wasted read, where Asio's wait would have
//   made its `epoll_ctl` anyway). No datagram is left unread with nobody woken.
// The caller must have read the socket until a read returned fewer datagrams than it asked for
// (the socket's queue was empty at that moment) before it starts a wait: like any edge-triggered
// wait, it does not wake for datagrams that were already queued before the last edge was taken.
//
// Where it runs: Linux with Boost 1.74's epoll reactor (the version the project builds with; its
// reactor's internals are what this relies on, checked in ReadableWait.cpp). Elsewhere
// `kWithoutRearm` is false and the caller uses `async_wait`.
//
// Thread safety: one wait in flight per object; Start under whatever lock serialises the caller's
// reads of the socket. The callback runs on a thread running the socket's io_context, as a
// completion handler (never inside Start).
#pragma once

#include <boost/asio/ip/udp.hpp>
#include <boost/system/error_code.hpp>
#include <boost/version.hpp>
#include <memory>

#if defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IOCP) && \
    !defined(BOOST_ASIO_DISABLE_EPOLL) && BOOST_VERSION / 100 == 1074
#define TIMERWHEEL_READABLE_WAIT_WITHOUT_REARM 1
#else
#define TIMERWHEEL_READABLE_WAIT_WITHOUT_REARM 0
#endif

namespace timerwheel::udp {

class ReadableWait {
 public:
  // Whether this build has the wait; if not, constructing one throws std::logic_error.
  static constexpr bool kWithoutRearm = TIMERWHEEL_READABLE_WAIT_WITHOUT_REARM != 0;

  // Called once per Start: `error` is operation_aborted when the socket was closed or cancelled
  // first. `context` is Start's.
  using Callback = void (*)(void* context, const boost::system::error_code& error);

  // For waits on `socket`, which must be open and outlive this object.
  explicit ReadableWait(boost::asio::ip::udp::socket& socket);
  ~ReadableWait();
  ReadableWait(const ReadableWait&) = delete;
  ReadableWait& operator=(const ReadableWait&) = delete;

  // Starts the wait. `keepAlive` is held until the callback has returned (or until the
  // io_context drops the wait unrun, at its destruction). Allocates nothing. Throws
  // std::logic_error, changing nothing, if a wait of this object is already in flight.
  void Start(std::shared_ptr<void> keepAlive, Callback callback, void* context);

 private:
  struct Operation;
  boost::asio::ip::udp::socket& m_socket;
  std::unique_ptr<Operation> m_operation;
};

}  // namespace timerwheel::udp
