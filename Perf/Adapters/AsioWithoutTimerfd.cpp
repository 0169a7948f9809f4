// Keeps Boost.Asio's epoll reactor off timerfd in the timer benchmark, so that its timers run on
// the benchmark's virtual clock (Perf/README.md, "Implementations").
//
// Boost 1.74 has no switch for this: BOOST_ASIO_DISABLE_TIMERFD, which this benchmark used to
// define, is not read by its detail/config.hpp, which defines BOOST_ASIO_HAS_TIMERFD whenever it
// has epoll and glibc >= 2.8. What the reactor does have is a fallback for kernels without
// timerfd: when timerfd_create fails, epoll_reactor keeps timer_fd_ at -1, checks its timer
// queues whenever its interrupter wakes it, and turns a new earliest timer into an interrupt
// (epoll_ctl) instead of a timerfd_settime. This definition makes timerfd_create fail for the
// benchmark executable, which is the only code that calls it (Asio is header-only; neither this
// library nor libevent's default epoll backend uses timerfd).
#include <cerrno>

extern "C" int timerfd_create(int /*clockId*/, int /*flags*/) noexcept {
  errno = ENOSYS;
  return -1;
}
