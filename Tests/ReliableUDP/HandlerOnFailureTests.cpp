// What a call that fails for memory does with the handler it was given, and what Close does with
// the accept waiters when an allocation fails. Each allocation of the call is failed in turn
// (FailNthAllocation) until the call makes no more.
//
// A call that throws std::bad_alloc before it has queued its operation does not call the handler,
// and destroys it only once it holds none of the endpoint's locks: the handler may hold the last
// reference to a Connection, whose destructor takes its shard's lock, or do anything else as it
// goes. Destroyed under a lock that its destruction takes again, it deadlocks the thread (a
// std::mutex locked twice): so each body runs on a thread of its own, and the test waits for it
// at most kDeadlockTimeout (FinishesWithin). A body takes milliseconds (a few hundred under a
// sanitizer): 20 s is a hundred times that, and a deadlock never ends. A body that does not finish
// is left blocked, with whatever it owns.
#include <array>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"
#include "Support/AllocationCounter.h"

using namespace timerwheel;
using namespace timerwheel::test;
using rudp::Connection;

namespace {

constexpr Microseconds kSecond = 1'000'000;
constexpr auto kDeadlockTimeout = std::chrono::seconds(20);
// Far more allocations than one call makes: a sweep that reaches it has stopped finding them.
constexpr std::size_t kMaxSweep = 400;

// Runs `body` on a thread of its own and returns what it returned (or rethrows what it threw);
// nullopt if it has not finished within `timeout`: then the thread is left running (blocked, for
// a deadlock) and keeps what `body` owns. A finished thread is joined before this returns, so
// that no thread of an earlier body is still ending while the next runs. (A detached thread and a
// promise, as this was first, failed one run in twenty under Wine in the MinGW build: the body's
// thread had gone, and its future never became ready.)
template <class Body>
auto FinishesWithin(std::chrono::seconds timeout, Body body) -> std::optional<decltype(body())> {
  using Result = decltype(body());
  struct Shared {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<Result> result;
    std::exception_ptr error;
    bool finished = false;
  };
  auto shared = std::make_shared<Shared>();
  std::thread worker([shared, body = std::move(body)]() mutable {
    std::optional<Result> result;
    std::exception_ptr error;
    try {
      result.emplace(body());
    } catch (...) {
      error = std::current_exception();
    }
    const std::lock_guard<std::mutex> lock(shared->mutex);
    shared->result = std::move(result);
    shared->error = error;
    shared->finished = true;
    shared->done.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(shared->mutex);
    if (!shared->done.wait_for(lock, timeout, [&] { return shared->finished; })) {
      lock.unlock();
      worker.detach();
      return std::nullopt;
    }
  }
  worker.join();
  if (shared->error) std::rethrow_exception(shared->error);
  return std::move(shared->result);
}

// What one failing call did.
struct CallOutcome {
  bool threw = false;     // std::bad_alloc came out of the call
  bool failed = false;    // the allocation failed (inside the call, or caught there)
  bool released = false;  // right after the call: the handler it held the last reference in is gone
  int calls = 0;          // the handler's, by the end of the body
};

// --- Connection's calls, on the simulated network (the public Connection over LockedEngine) ---

enum class ConnectionCall { Send, SendAfterClose, Receive, WaitClosed };

// A connection on a fresh network; then `call` on the client's Connection with a handler that
// holds the last reference to it, the nth allocation of the call failing (SendAfterClose: the
// post of its completion, refused at once, fails). Then the server aborts the connection, so that
// a handler the call did take runs.
CallOutcome CallHoldingLastReference(ConnectionCall call, std::size_t n) {
  SimulatedNetwork network(17);
  rudp::EndpointOptions serverOptions;
  serverOptions.acceptIncoming = true;
  SimulatedHost& server = network.AddHost(9000, serverOptions);
  SimulatedHost& client = network.AddHost(9001);
  std::shared_ptr<Connection> clientSide, serverSide;
  server.Accept(
      [&](boost::system::error_code, std::shared_ptr<Connection> c) { serverSide = std::move(c); });
  client.Connect(server.Address(), [&](boost::system::error_code, std::shared_ptr<Connection> c) {
    clientSide = std::move(c);
  });
  if (!network.RunFor(60 * kSecond, [&] { return clientSide && serverSide; })) {
    throw std::runtime_error("no connection");
  }
  CallOutcome outcome;
  const std::vector<std::uint8_t> message(100, 0x5a);
  std::vector<std::uint8_t> received;
  const std::weak_ptr<Connection> watch = clientSide;
  Connection* const connection = clientSide.get();
  Connection::Handler handler = [keep = std::move(clientSide),
                                 &outcome](boost::system::error_code) { ++outcome.calls; };
  if (call == ConnectionCall::SendAfterClose) {
    connection->Close();
    network.failPostsOf = &client;
    network.failPosts = 1;
  }
  {
    FailNthAllocation failure(n);
    if (call == ConnectionCall::SendAfterClose) failure.SetActive(false);
    try {
      switch (call) {
        case ConnectionCall::Send:
        case ConnectionCall::SendAfterClose:
          connection->AsyncSend(boost::asio::buffer(message), std::move(handler));
          break;
        case ConnectionCall::Receive:
          connection->AsyncReceive(received, std::move(handler));
          break;
        case ConnectionCall::WaitClosed:
          connection->AsyncWaitClosed(std::move(handler));
          break;
      }
    } catch (const std::bad_alloc&) {
      outcome.threw = true;
    }
    outcome.failed =
        call == ConnectionCall::SendAfterClose ? network.failPosts == 0 : failure.Failed();
  }
  network.failPosts = 0;
  outcome.released = watch.expired();
  serverSide->Abort();
  network.RunFor(5 * kSecond);
  return outcome;
}

// Fails each allocation of `call` in turn; each must leave the handler uncalled and destroyed
// outside the lock if the call threw, or called once if it did not.
void SweepConnectionCall(ConnectionCall call) {
  for (std::size_t n = 1; n <= kMaxSweep; ++n) {
    CAPTURE(n);
    const auto outcome =
        FinishesWithin(kDeadlockTimeout, [call, n] { return CallHoldingLastReference(call, n); });
    REQUIRE(outcome);  // else it deadlocked: the handler was destroyed under the engine's lock
    CAPTURE(outcome->threw, outcome->failed);
    if (outcome->threw) {
      CHECK(outcome->failed);
      CHECK(outcome->released);  // its Connection went with it, as the call returned
      CHECK(outcome->calls == 0);
    } else {
      CHECK_FALSE(outcome->released);
      CHECK(outcome->calls == 1);
    }
    if (!outcome->failed || call == ConnectionCall::SendAfterClose) return;
  }
  FAIL("the call made more than " << kMaxSweep << " allocations");
}

// --- Endpoint's calls, over loopback (the real Endpoint and its locks) -----------------------

using Udp = boost::asio::ip::udp;

// Runs `io`'s handlers until `done`, for at most `timeout` of real time (generous: a loopback
// handshake takes a millisecond); false at the timeout or once `io` has nothing left to run.
bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& done,
              std::chrono::seconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (io.stopped()) io.restart();
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.run_one_until(deadline) == 0 && io.stopped()) return done();
  }
  return true;
}

rudp::EndpointOptions ServerOptions() {
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  return options;
}

// A server and a client endpoint on loopback, their io_context run by the body's thread.
struct LoopbackPair {
  LoopbackPair()
      : server(io, Udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), 0),
               ServerOptions()),
        client(io, Udp::endpoint(boost::asio::ip::make_address_v4("127.0.0.1"), 0)) {}

  void Connect() {
    server.AsyncAccept([this](boost::system::error_code, std::shared_ptr<Connection> c) {
      serverSide = std::move(c);
    });
    client.AsyncConnect(server.LocalEndpoint(),
                        [this](boost::system::error_code, std::shared_ptr<Connection> c) {
                          clientSide = std::move(c);
                        });
    if (!RunUntil(io, [this] { return clientSide && serverSide; })) {
      throw std::runtime_error("no connection over loopback");
    }
  }

  // Closes both and runs what is left (completions the closes posted) until nothing is, or for
  // at most 5 s (closed endpoints have nothing left: a timer wait the close did not cancel).
  void CloseAndDrain() {
    client.Close();
    server.Close();
    RunUntil(
        io, [] { return false; }, std::chrono::seconds(5));
  }

  boost::asio::io_context io;  // first: it outlives the endpoints
  rudp::Endpoint server;
  rudp::Endpoint client;
  std::shared_ptr<Connection> clientSide, serverSide;
};

// A capture whose destruction calls into the endpoint (AsyncAccept takes the accept waiters' lock
// and then every shard's): destroyed under any of them, it deadlocks. What it queues is a waiter
// that the endpoint's close fails. It calls in only while `endpoint` is set (the test clears it
// before the endpoint goes).
class CallsInAsItGoes {
 public:
  explicit CallsInAsItGoes(std::shared_ptr<rudp::Endpoint*> endpoint)
      : m_endpoint(std::move(endpoint)) {}
  CallsInAsItGoes(CallsInAsItGoes&&) noexcept = default;
  CallsInAsItGoes& operator=(CallsInAsItGoes&&) = delete;
  ~CallsInAsItGoes() {
    if (!m_endpoint || *m_endpoint == nullptr) return;
    try {
      (*m_endpoint)->AsyncAccept([](boost::system::error_code, std::shared_ptr<Connection>) {});
    } catch (const std::bad_alloc&) {  // the failing call's allocation is spent, but just in case
    }
  }

 private:
  std::shared_ptr<rudp::Endpoint*> m_endpoint;  // null once moved from
};

}  // namespace

TEST_CASE("a Connection call that throws destroys its handler outside the engine's lock",
          "[rudp][sim][allocation-failure]") {
  // The handler holds the last reference to the Connection it was given to: its destruction is
  // the connection's end, which takes the engine's lock. Before, the engine's failure (the queue's
  // growth, the close waiters', a post of a completion refused at once) destroyed it inside the
  // call's lock: the thread deadlocked on its own lock.
  SECTION("AsyncSend") { SweepConnectionCall(ConnectionCall::Send); }
  SECTION("AsyncSend refused at once, its completion not posted") {
    SweepConnectionCall(ConnectionCall::SendAfterClose);
  }
  SECTION("AsyncReceive") { SweepConnectionCall(ConnectionCall::Receive); }
  SECTION("AsyncWaitClosed") { SweepConnectionCall(ConnectionCall::WaitClosed); }
}

TEST_CASE("an AsyncConnect that throws destroys its handler outside the endpoint's locks",
          "[rudp][allocation-failure][loopback]") {
  // The handler holds the last reference to another connection of the same shard. Before, the
  // handler's wrapping and the engine's connect (its undo) destroyed it inside the shard's lock,
  // whose ~Connection took again: the thread deadlocked.
  for (std::size_t n = 1; n <= kMaxSweep; ++n) {
    CAPTURE(n);
    const auto outcome = FinishesWithin(kDeadlockTimeout, [n] {
      CallOutcome result;
      LoopbackPair pair;
      pair.Connect();
      const std::weak_ptr<Connection> watch = pair.clientSide;
      rudp::Endpoint::ConnectHandler handler = [keep = std::move(pair.clientSide), &result](
                                                   boost::system::error_code,
                                                   std::shared_ptr<Connection>) { ++result.calls; };
      {
        FailNthAllocation failure(n);
        try {
          pair.client.AsyncConnect(pair.server.LocalEndpoint(), std::move(handler));
        } catch (const std::bad_alloc&) {
          result.threw = true;
        }
        result.failed = failure.Failed();
      }
      result.released = watch.expired();
      pair.CloseAndDrain();  // a connect the call took completes (connected, or EndpointClosed)
      return result;
    });
    REQUIRE(outcome);  // else it deadlocked: the handler was destroyed under the shard's lock
    CAPTURE(outcome->threw, outcome->failed);
    if (outcome->threw) {
      CHECK(outcome->failed);
      CHECK(outcome->released);
      CHECK(outcome->calls == 0);
    } else {
      CHECK(outcome->calls == 1);
    }
    if (!outcome->failed) return;
  }
  FAIL("AsyncConnect made more than " << kMaxSweep << " allocations");
}

TEST_CASE("an AsyncAccept that throws destroys its handler outside the endpoint's locks",
          "[rudp][allocation-failure][loopback]") {
  // The handler's destruction calls into the endpoint (CallsInAsItGoes). Before, the wrapping of
  // the handler, and after the close the post of its completion, ran under the accept waiters'
  // lock and destroyed it there when they failed: the thread deadlocked (a ~Connection there
  // would take a shard's lock inside that one, against the lock order).
  const bool closed = GENERATE(false, true);
  CAPTURE(closed);
  for (std::size_t n = 1; n <= kMaxSweep; ++n) {
    CAPTURE(n);
    const auto outcome = FinishesWithin(kDeadlockTimeout, [n, closed] {
      CallOutcome result;
      LoopbackPair pair;
      if (closed) pair.server.Close();
      const auto server = std::make_shared<rudp::Endpoint*>(&pair.server);
      rudp::Endpoint::ConnectHandler handler = [probe = CallsInAsItGoes(server), &result](
                                                   boost::system::error_code,
                                                   std::shared_ptr<Connection>) { ++result.calls; };
      {
        FailNthAllocation failure(n);
        try {
          pair.server.AsyncAccept(std::move(handler));
        } catch (const std::bad_alloc&) {
          result.threw = true;
        }
        result.failed = failure.Failed();
      }
      pair.CloseAndDrain();  // a waiter the call took completes with EndpointClosed
      *server = nullptr;     // a handler left (none, unless a completion was lost) calls nothing
      return result;
    });
    REQUIRE(outcome);  // else it deadlocked: the handler was destroyed under an endpoint's lock
    CAPTURE(outcome->threw, outcome->failed);
    CHECK(outcome->calls == (outcome->threw ? 0 : 1));
    if (outcome->threw) CHECK(outcome->failed);
    if (!outcome->failed) return;
  }
  FAIL("AsyncAccept made more than " << kMaxSweep << " allocations");
}

TEST_CASE("a Close whose allocation fails fails every accept waiter once, and a retry finishes",
          "[rudp][allocation-failure][loopback]") {
  // Close ends the connections (a pending receive completes) and fails the accept waiters. Before,
  // it swapped the waiters into a local deque (whose construction allocates) after marking the
  // endpoint closed, and posted them one by one: a post that failed lost that waiter and every
  // one after it (never called), skipped the timers' shutdown, and a second Close did nothing.
  constexpr std::size_t kWaiters = 3;
  for (std::size_t n = 1; n <= kMaxSweep; ++n) {
    CAPTURE(n);
    struct Outcome {
      bool threw = false;
      bool failed = false;
      std::array<int, kWaiters> waiterCalls{};
      std::array<boost::system::error_code, kWaiters> waiterErrors{};
      int receiveCalls = 0;
      boost::system::error_code receiveError;
    };
    const auto outcome = FinishesWithin(kDeadlockTimeout, [n] {
      Outcome result;
      LoopbackPair pair;
      pair.Connect();
      std::vector<std::uint8_t> received;
      pair.serverSide->AsyncReceive(received, [&result](boost::system::error_code ec) {
        ++result.receiveCalls;
        result.receiveError = ec;
      });
      for (std::size_t i = 0; i < kWaiters; ++i) {
        pair.server.AsyncAccept(
            [&result, i](boost::system::error_code ec, std::shared_ptr<Connection>) {
              ++result.waiterCalls[i];
              result.waiterErrors[i] = ec;
            });
      }
      {
        FailNthAllocation failure(n);
        try {
          pair.server.Close();
        } catch (const std::bad_alloc&) {
          result.threw = true;
        }
        result.failed = failure.Failed();
      }
      if (result.threw) pair.server.Close();  // the retry finishes what the first left
      pair.serverSide.reset();
      pair.clientSide.reset();
      pair.CloseAndDrain();  // everything posted runs, once
      return result;
    });
    REQUIRE(outcome);
    CAPTURE(outcome->threw, outcome->failed);
    for (std::size_t i = 0; i < kWaiters; ++i) {
      CAPTURE(i);
      CHECK(outcome->waiterCalls[i] == 1);
      CHECK(outcome->waiterErrors[i] == rudp::Error::EndpointClosed);
    }
    CHECK(outcome->receiveCalls == 1);
    CHECK(outcome->receiveError == rudp::Error::EndpointClosed);
    if (!outcome->failed) return;
  }
  FAIL("Close made more than " << kMaxSweep << " allocations");
}
