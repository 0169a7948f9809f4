#include "UdpSocket/ReadableWait.h"

#include <stdexcept>
#include <utility>

#if TIMERWHEEL_READABLE_WAIT_WITHOUT_REARM
#include <boost/asio/detail/reactor.hpp>
#include <boost/asio/detail/reactor_op.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#include <type_traits>
#endif

namespace timerwheel::udp {

#if TIMERWHEEL_READABLE_WAIT_WITHOUT_REARM

namespace {

namespace asio_detail = boost::asio::detail;
using Socket = boost::asio::ip::udp::socket;

// What this relies on in Boost 1.74 (detail/impl/epoll_reactor.ipp, detail/reactor_op.hpp):
// - epoll_reactor::start_op(op_type, descriptor, descriptor_data, op, is_continuation,
//   allow_speculative): with allow_speculative and an empty queue it calls op->perform() at once
//   if the descriptor's try_speculative_ flag is set, completing the op (posted, never inline) if
//   perform reports done; otherwise it queues the op, and for a read op makes no epoll_ctl;
// - on an event it sets try_speculative_ and performs the queued ops in order; a perform that
//   reports done_and_exhausted clears try_speculative_;
// - an op's complete function is called with a null owner when the op is dropped unrun
//   (shutdown), and its ec_ is operation_aborted when the descriptor was closed or cancelled.
// The compile-time checks below catch a changed signature; the behaviour is what the version
// test in ReadableWait.h pins.
using Reactor = asio_detail::epoll_reactor;
static_assert(std::is_same_v<asio_detail::reactor, Reactor>);
static_assert(
    std::is_same_v<decltype(std::declval<Reactor&>().start_op(
                       0, asio_detail::socket_type{}, std::declval<Reactor::per_descriptor_data&>(),
                       static_cast<asio_detail::reactor_op*>(nullptr), false, false)),
                   void>);

// The socket's implementation (its descriptor and the reactor's data for it) is a protected
// member of basic_socket: a pointer to that member, formed in a class derived from it, reaches it.
struct SocketImplementation : Socket {
  static auto& Of(Socket& socket) {
    return (socket.*(&SocketImplementation::impl_)).get_implementation();
  }
};

}  // namespace

struct ReadableWait::Operation : asio_detail::reactor_op {
  Operation() : reactor_op(boost::system::error_code(), &Perform, &Complete) {}

  // The reactor's attempt: nothing to read here (the caller reads); "exhausted" so that the
  // reactor tries no more until the next edge.
  static status Perform(reactor_op*) { return done_and_exhausted; }

  static void Complete(void* owner, asio_detail::operation* base, const boost::system::error_code&,
                       std::size_t) {
    Operation& operation = *static_cast<Operation*>(base);
    // Everything is taken out before the callback, which may start the next wait, and may drop
    // the last reference to whatever owns this object (then `operation` is gone after it).
    std::shared_ptr<void> keepAlive = std::move(operation.keepAlive);
    const Callback callback = operation.callback;
    void* const context = operation.context;
    const boost::system::error_code error = operation.ec_;
    operation.inFlight = false;
    if (owner != nullptr) callback(context, error);
  }

  Reactor* reactor = nullptr;
  std::shared_ptr<void> keepAlive;
  Callback callback = nullptr;
  void* context = nullptr;
  bool inFlight = false;
};

ReadableWait::ReadableWait(Socket& socket) : m_socket(socket), m_operation(new Operation) {
  m_operation->reactor = &boost::asio::use_service<Reactor>(
      boost::asio::query(socket.get_executor(), boost::asio::execution::context));
}

ReadableWait::~ReadableWait() = default;

void ReadableWait::Start(std::shared_ptr<void> keepAlive, Callback callback, void* context) {
  Operation& operation = *m_operation;
  if (operation.inFlight)
    throw std::logic_error("ReadableWait::Start: a wait is already in flight");
  operation.ec_ = boost::system::error_code();
  operation.keepAlive = std::move(keepAlive);
  operation.callback = callback;
  operation.context = context;
  operation.inFlight = true;
  auto& implementation = SocketImplementation::Of(m_socket);
  operation.reactor->start_op(Reactor::read_op, implementation.socket_,
                              implementation.reactor_data_, &operation, false, true);
}

#else  // no such wait in this build: the caller uses async_wait

struct ReadableWait::Operation {};

ReadableWait::ReadableWait(boost::asio::ip::udp::socket& socket) : m_socket(socket) {
  throw std::logic_error("ReadableWait: not available in this build (kWithoutRearm is false)");
}

ReadableWait::~ReadableWait() = default;

void ReadableWait::Start(std::shared_ptr<void>, Callback, void*) {
  throw std::logic_error("ReadableWait: not available in this build (kWithoutRearm is false)");
}

#endif

}  // namespace timerwheel::udp
