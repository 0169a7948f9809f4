// DeferOrPost: hands a handler to an io_context to run soon, from any thread.
#pragma once

#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <utility>

namespace timerwheel::detail {

// From one of the io_context's own threads the handler is deferred: it goes to that thread's
// queue and runs once the current handler returns, waking no other thread and not interrupting
// the reactor (a post would do either, for work this thread is about to be free for). From any
// other thread it is posted.
template <class Handler>
void DeferOrPost(boost::asio::io_context& ioContext, Handler&& handler) {
  if (ioContext.get_executor().running_in_this_thread()) {
    boost::asio::defer(ioContext, std::forward<Handler>(handler));
  } else {
    boost::asio::post(ioContext, std::forward<Handler>(handler));
  }
}

}  // namespace timerwheel::detail
