// ReliableUDP connections used from several threads at once over loopback (issue 18): the
// application's threads and the io_context's threads act on the same connections while their
// timers fire, and Close and Abort of one connection race each other and the peer's Abort. Run
// under TSan by the test command (tsan preset), which is what finds a missing lock here; the
// assertions find a handler lost, run twice or run with the wrong end reason.
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Support/ConnectEndpoints.h"
#include "Support/IoThreads.h"

using namespace timerwheel;
using namespace timerwheel::test;
using rudp::Connection;
using rudp::Endpoint;
using rudp::Error;
using Udp = boost::asio::ip::udp;

namespace {

constexpr auto kGenerous = std::chrono::seconds(60);

const Udp::endpoint kAnyLoopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);

// Every operation started and how it completed: each handler must run exactly once.
class Ledger {
 public:
  // A handler that records its completion (and runs `then` with the error, if given).
  Connection::Handler Track(std::function<void(boost::system::error_code)> then = {}) {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      ++m_started;
    }
    auto ran = std::make_shared<bool>(false);
    return [this, ran, then = std::move(then)](boost::system::error_code error) {
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (*ran) {
          ++m_ranTwice;
        } else {
          ++m_completed;
        }
        *ran = true;
        m_errors.insert(error);
      }
      if (then) then(error);
      m_changed.notify_all();
    };
  }

  // True once every tracked handler has run, within `timeout`.
  bool WaitAllCompleted(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(m_mutex);
    return m_changed.wait_for(lock, timeout, [this] { return m_completed == m_started; });
  }

  int Started() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_started;
  }
  int RanTwice() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_ranTwice;
  }
  std::set<boost::system::error_code> Errors() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_errors;
  }

 private:
  mutable std::mutex m_mutex;
  std::condition_variable m_changed;
  int m_started = 0;
  int m_completed = 0;
  int m_ranTwice = 0;
  std::set<boost::system::error_code> m_errors;
};

// Echoes every message back until its connection ends; holds the connection until then.
struct Echo : std::enable_shared_from_this<Echo> {
  Echo(std::shared_ptr<Connection> c, Ledger& l) : connection(std::move(c)), ledger(l) {}
  void Next() {
    auto self = shared_from_this();
    connection->AsyncReceive(buffer, ledger.Track([self](boost::system::error_code error) {
      if (error) return;
      self->connection->AsyncSend(boost::asio::buffer(self->buffer),
                                  self->ledger.Track([self](boost::system::error_code sent) {
                                    if (!sent) self->Next();
                                  }));
    }));
  }
  std::shared_ptr<Connection> connection;
  Ledger& ledger;
  std::vector<std::uint8_t> buffer;
};

bool IsEndReason(const boost::system::error_code& error) {
  return error == Error::ClosedByPeer || error == Error::ClosedLocally || error == Error::Aborted ||
         error == Error::AbortedByPeer;
}

}  // namespace

TEST_CASE(
    "sends, receives, timers, Close and Abort of the same connections race from several "
    "threads, and every handler runs once",
    "[.][realtime][rudp][loopback][concurrency]") {
  // One shard: one lock for everything; two: connections in parallel, each under its shard's.
  const std::size_t shards = GENERATE(1u, 2u);
  CAPTURE(shards);
  IoThreads io(3);
  rudp::EndpointOptions serverOptions;
  serverOptions.acceptIncoming = true;
  serverOptions.shards = shards;
  // Keepalive and idle timers that fire while the threads act (loopback idles between bursts).
  serverOptions.keepaliveInterval = 50;
  rudp::EndpointOptions clientOptions;
  clientOptions.keepaliveInterval = 50;
  clientOptions.shards = shards;
  Endpoint server(io.Io(), kAnyLoopback, serverOptions);
  Endpoint client(io.Io(), kAnyLoopback, clientOptions);
  constexpr std::size_t kConnections = 24;
  constexpr int kOperations = 6;  // sends and receives per connection and thread

  Ledger ledger;
  std::vector<std::shared_ptr<Connection>> clients, servers;
  for (std::size_t i = 0; i < kConnections; ++i) {
    auto [clientSide, serverSide] =
        ConnectEndpoints(client, server, server.LocalEndpoint(), kGenerous);
    REQUIRE(clientSide);
    REQUIRE(serverSide);
    clients.push_back(clientSide);
    servers.push_back(serverSide);
  }
  // End reasons, by connection (written by the io threads as each side ends).
  std::mutex reasonsMutex;
  std::vector<boost::system::error_code> clientReasons(kConnections), serverReasons(kConnections);
  for (std::size_t i = 0; i < kConnections; ++i) {
    clients[i]->AsyncWaitClosed(ledger.Track([&, i](boost::system::error_code reason) {
      std::lock_guard<std::mutex> lock(reasonsMutex);
      clientReasons[i] = reason;
    }));
    servers[i]->AsyncWaitClosed(ledger.Track([&, i](boost::system::error_code reason) {
      std::lock_guard<std::mutex> lock(reasonsMutex);
      serverReasons[i] = reason;
    }));
    std::make_shared<Echo>(servers[i], ledger)->Next();
  }

  // Four application threads, released together. 0 and 1 walk the connections in the same
  // order and meet at each: 0 sends and receives and then closes it while 1, at the same moment,
  // aborts every other one (on a quiet machine about a third of the clients end Aborted, the rest
  // ClosedLocally: the Abort came after the Close completed; a busy one may see no Abort win). 2
  // walks backwards, sending from the server side and aborting every fifth server side; 3 reads
  // statistics of both sides in a third order.
  std::mutex startMutex;
  std::condition_variable startSignal;
  bool go = false;
  std::vector<std::atomic<int>> arrived(kConnections);
  auto meet = [&](std::size_t i) {
    arrived[i].fetch_add(1);
    while (arrived[i].load() < 2) std::this_thread::yield();
  };
  const std::vector<std::uint8_t> message(1500, 0x5a);
  auto receiveBuffers =
      std::make_shared<std::vector<std::vector<std::uint8_t>>>(kConnections * kOperations);
  std::vector<std::thread> threads;
  for (int role = 0; role < 4; ++role) {
    threads.emplace_back([&, role] {
      {
        std::unique_lock<std::mutex> lock(startMutex);
        startSignal.wait(lock, [&] { return go; });
      }
      for (std::size_t n = 0; n < kConnections; ++n) {
        switch (role) {
          case 0:
            for (int k = 0; k < kOperations; ++k) {
              clients[n]->AsyncSend(boost::asio::buffer(message), ledger.Track());
              clients[n]->AsyncReceive(
                  (*receiveBuffers)[n * kOperations + k],
                  ledger.Track([receiveBuffers](boost::system::error_code) {}));
            }
            meet(n);
            clients[n]->Close();
            break;
          case 1:
            meet(n);
            if (n % 2 == 0) clients[n]->Abort();
            break;
          case 2: {
            const std::size_t i = kConnections - 1 - n;
            for (int k = 0; k < kOperations; ++k)
              servers[i]->AsyncSend(boost::asio::buffer(message), ledger.Track());
            if (i % 5 == 0) servers[i]->Abort();
            break;
          }
          default: {
            const std::size_t i = (n * 7 + 3) % kConnections;  // 7 and 24 are coprime
            (void)clients[i]->GetStatistics();
            (void)servers[i]->GetStatistics();
            (void)client.GetStatistics();
            (void)server.GetStatistics();
            break;
          }
        }
      }
    });
  }
  {
    std::lock_guard<std::mutex> lock(startMutex);
    go = true;
  }
  startSignal.notify_all();
  for (auto& thread : threads) thread.join();

  // Every connection ends (the graceful closes deliver what was sent before them), and with it
  // every operation started on it completes: nothing is left waiting, nothing runs twice.
  REQUIRE(ledger.WaitAllCompleted(kGenerous));
  CHECK(ledger.RanTwice() == 0);
  CHECK(ledger.Started() >= static_cast<int>(kConnections) * (2 + 3 * kOperations));
  {
    std::lock_guard<std::mutex> lock(reasonsMutex);
    for (std::size_t i = 0; i < kConnections; ++i) {
      const auto& ours = clientReasons[i];
      const auto& theirs = serverReasons[i];
      CAPTURE(i, ours.message(), theirs.message());
      CHECK(IsEndReason(ours));
      CHECK(IsEndReason(theirs));
      // The two sides agree on who ended the connection and how.
      if (ours == Error::AbortedByPeer) CHECK(theirs == Error::Aborted);
      if (theirs == Error::AbortedByPeer) CHECK(ours == Error::Aborted);
      if (theirs == Error::ClosedByPeer) CHECK(ours == Error::ClosedLocally);
      CHECK(ours != Error::ClosedByPeer);  // the server side never closes first here
    }
  }
  // Errors seen by any operation: success, an end reason, or the abandonment of a receive by a
  // connection handle dropped without a graceful end (operation_aborted).
  for (const auto& error : ledger.Errors()) {
    CAPTURE(error.message());
    CHECK((!error || IsEndReason(error) || error == boost::asio::error::operation_aborted));
  }
  clients.clear();
  servers.clear();
  client.Close();
  server.Close();
  io.Stop();
  CHECK(client.GetStatistics().connectionsOpen == 0);
  CHECK(server.GetStatistics().connectionsOpen == 0);
}
