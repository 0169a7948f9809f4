// ReliableUDP over real UDP sockets on loopback, through Boost.Asio (epoll on Linux, IOCP on
// Windows): the same code path a server runs. Waits are on futures with generous timeouts.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Support/ConnectEndpoints.h"
#include "ReliableUDP/Support/MessageStream.h"
#include "Support/IoThreads.h"

using namespace timerwheel;
using namespace timerwheel::test;
using rudp::Connection;
using rudp::Endpoint;
using Udp = boost::asio::ip::udp;

namespace {

constexpr auto kGenerous = std::chrono::seconds(60);

const Udp::endpoint kAnyLoopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);

rudp::EndpointOptions ServerOptions() {
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  return options;
}

// Connects `client` to `server` and returns both ends of the connection.
std::pair<std::shared_ptr<Connection>, std::shared_ptr<Connection>> ConnectPair(Endpoint& client,
                                                                                Endpoint& server) {
  auto sides = ConnectEndpoints(client, server, server.LocalEndpoint(), kGenerous);
  REQUIRE(sides.first);
  REQUIRE(sides.second);
  return sides;
}

// Runs the stream and waits for it to finish.
void RunStream(const std::shared_ptr<MessageStream>& stream) {
  stream->Start();
  REQUIRE(stream->WaitFinished(std::chrono::seconds(120)));
}

}  // namespace

TEST_CASE("loopback echo of messages from 1 byte to the maximum size, byte for byte and in order",
          "[.][realtime][rudp][loopback]") {
  const unsigned threads = GENERATE(1u, 2u);
  // And encrypted (issue 20): the server's key pair, the client pinning its public key.
  const bool encrypted = GENERATE(false, true);
  // And sharded (issue 18): each endpoint's connections over two locks.
  const std::size_t shards = GENERATE(1u, 2u);
  CAPTURE(threads, encrypted, shards);
  IoThreads io(threads);
  rudp::EndpointOptions serverOptions = ServerOptions();
  rudp::EndpointOptions clientOptions;
  serverOptions.shards = shards;
  clientOptions.shards = shards;
  if (encrypted) {
    const rudp::ServerKeyPair key = rudp::MakeServerKeyPair();
    serverOptions.serverSecretKey = key.secretKey;
    clientOptions.serverPublicKey = key.publicKey;
  }
  Endpoint server(io.Io(), kAnyLoopback, serverOptions);
  Endpoint client(io.Io(), kAnyLoopback, clientOptions);
  auto [clientSide, serverSide] = ConnectPair(client, server);

  const std::size_t maximum = rudp::EndpointOptions{}.maxMessageSize;
  const std::vector<std::size_t> sizes = {1,    2,       100,    1100,    1200,    1201,
                                          4096, 65'535,  65'536, 300'000, 999'999, maximum,
                                          1,    maximum, 17,     50'000};
  auto sizeOf = [&](std::uint64_t i) { return sizes[i % sizes.size()]; };
  const std::uint64_t count = 3 * sizes.size();
  // Both directions at once.
  auto up = std::make_shared<MessageStream>(clientSide, serverSide, count, sizeOf, 4);
  auto down = std::make_shared<MessageStream>(serverSide, clientSide, count, sizeOf, 4);
  up->Start();
  down->Start();
  REQUIRE(up->WaitFinished(std::chrono::seconds(120)));
  REQUIRE(down->WaitFinished(std::chrono::seconds(120)));
  CHECK(up->Error() == "");
  CHECK(down->Error() == "");
  CHECK(up->Received() == count);
  CHECK(down->Received() == count);

  // A graceful close: the server learns of it, the client completes it.
  std::promise<boost::system::error_code> clientClosed, serverClosed;
  clientSide->AsyncWaitClosed([&](boost::system::error_code ec) { clientClosed.set_value(ec); });
  serverSide->AsyncWaitClosed([&](boost::system::error_code ec) { serverClosed.set_value(ec); });
  clientSide->Close();
  auto clientReason = clientClosed.get_future();
  auto serverReason = serverClosed.get_future();
  REQUIRE(clientReason.wait_for(kGenerous) == std::future_status::ready);
  REQUIRE(serverReason.wait_for(kGenerous) == std::future_status::ready);
  CHECK(clientReason.get() == rudp::Error::ClosedLocally);
  CHECK(serverReason.get() == rudp::Error::ClosedByPeer);
}

TEST_CASE("a steady stream on loopback causes no spurious retransmission or PTO",
          "[.][realtime][rudp][loopback][timers]") {
  // One thread and one shard; or two threads and two shards, whose receivers hand datagrams over
  // in parallel (out of order, a connection would see spurious losses), batched or not.
  struct Setup {
    unsigned threads;
    std::size_t shards;
    bool batchedIo;
  };
  const Setup setup = GENERATE(Setup{1, 1, true}, Setup{2, 2, true}, Setup{2, 2, false});
  CAPTURE(setup.threads, setup.shards, setup.batchedIo);
  IoThreads io(setup.threads);
  rudp::EndpointOptions options;
  options.shards = setup.shards;
  options.batchedIo = setup.batchedIo;
  rudp::EndpointOptions serverOptions = options;
  serverOptions.acceptIncoming = true;
  Endpoint server(io.Io(), kAnyLoopback, serverOptions);
  Endpoint client(io.Io(), kAnyLoopback, options);
  auto [clientSide, serverSide] = ConnectPair(client, server);
  auto stream = std::make_shared<MessageStream>(
      clientSide, serverSide, 5000, [](std::uint64_t i) { return 1 + i % 2000; }, 8);
  RunStream(stream);
  CHECK(stream->Error() == "");
  const auto stats = clientSide->GetStatistics();
  INFO("packets sent " << stats.packetsSent << ", lost " << stats.packetsLost << ", PTOs "
                       << stats.probeTimeouts << ", srtt us " << stats.smoothedRttMicroseconds);
  CHECK(stats.spuriousRetransmits == 0);
  CHECK(stats.packetsLost == 0);
  // Re-armed as packets went out (at most once per millisecond of deadline).
  const unsigned loss = static_cast<unsigned>(rudp::TimerKind::LossDetection);
  CHECK(stats.timerArmed[loss] > 0);
  // Real time: the PTO is a few milliseconds here (srtt is tens of microseconds), so a thread that
  // a busy machine, a sanitizer or Wine stalls for longer makes a PTO fire with nothing lost; the
  // probe is acknowledged, nothing is declared lost (checked exactly above), and the stream goes
  // on. Tolerance: at most one PTO per 100 packets sent. Under a CPU hog on both cores of a
  // loaded 2-core machine the worst runs saw 4 in ~6,500 packets (release) and 10 in ~5,000
  // (asan-ubsan). That no PTO fires at all when nothing stalls is checked exactly, in virtual
  // time, by the simulated-network test "a steady stream re-arms the loss-detection timer
  // without it firing".
  CHECK(stats.probeTimeouts <= stats.packetsSent / 100);
}

TEST_CASE("1000 connections to one server socket exchange messages concurrently",
          "[.][realtime][rudp][loopback]") {
  const std::size_t shards = GENERATE(1u, 2u);
  CAPTURE(shards);
  IoThreads io(2);
  rudp::EndpointOptions serverOptions = ServerOptions();
  serverOptions.shards = shards;
  rudp::EndpointOptions clientOptions;
  clientOptions.shards = shards;
  // Tolerance: under Wine beside a CPU hog this run takes about 95 s, and once 1,196 of its 5,000
  // receives failed (the count did not yet tell errors from wrong bytes; the likely cause is
  // connections ending: overloaded sockets drop datagrams, probes back off, and an unacknowledged
  // message may then outlast the 30 s idle timeout). The test is about concurrency, not overload,
  // so the connections may stay quiet for as long as it waits.
  serverOptions.idleTimeout = clientOptions.idleTimeout = 150'000;
  Endpoint server(io.Io(), kAnyLoopback, serverOptions);
  Endpoint client(io.Io(), kAnyLoopback, clientOptions);
  constexpr int kConnections = 1000;

  std::mutex mutex;
  std::vector<std::shared_ptr<Connection>> serverSides, clientSides;
  std::promise<void> allConnected;
  int pending = 2 * kConnections;
  auto arrived = [&] {
    if (--pending == 0) allConnected.set_value();
  };
  std::function<void()> accept = [&] {
    server.AsyncAccept([&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
      if (ec) return;
      {
        std::lock_guard<std::mutex> lock(mutex);
        serverSides.push_back(std::move(c));
        arrived();
      }
      accept();
    });
  };
  accept();
  for (int i = 0; i < kConnections; ++i) {
    client.AsyncConnect(server.LocalEndpoint(),
                        [&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                          std::lock_guard<std::mutex> lock(mutex);
                          if (ec) return;
                          clientSides.push_back(std::move(c));
                          arrived();
                        });
  }
  REQUIRE(allConnected.get_future().wait_for(kGenerous) == std::future_status::ready);
  CHECK(server.GetStatistics().connectionsOpen == kConnections);

  // Each server-side connection echoes what it receives; each client sends 5 messages.
  struct Echo : std::enable_shared_from_this<Echo> {
    std::shared_ptr<Connection> connection;
    std::vector<std::uint8_t> buffer;
    void Next() {
      auto self = shared_from_this();
      connection->AsyncReceive(buffer, [self](boost::system::error_code ec) {
        if (ec) return;
        self->connection->AsyncSend(boost::asio::buffer(self->buffer),
                                    [self](boost::system::error_code sent) {
                                      if (!sent) self->Next();
                                    });
      });
    }
  };
  for (auto& c : serverSides) {
    auto echo = std::make_shared<Echo>();
    echo->connection = c;
    echo->Next();
  }
  constexpr int kMessages = 5;
  std::atomic<int> echoed{0};
  std::atomic<int> failed{0}, wrong{0};  // receives that ended with an error; wrong bytes
  std::promise<void> allEchoed;
  struct Client : std::enable_shared_from_this<Client> {
    std::shared_ptr<Connection> connection;
    int index = 0;
    int round = 0;
    std::vector<std::uint8_t> out, in;
  };
  std::vector<std::shared_ptr<Client>> drivers;
  std::function<void(std::shared_ptr<Client>)> sendRound = [&](std::shared_ptr<Client> c) {
    c->out = PatternMessage(static_cast<std::uint64_t>(c->index * 100 + c->round),
                            1 + (c->index * 37 + c->round * 1000) % 3000);
    c->connection->AsyncSend(boost::asio::buffer(c->out), [](boost::system::error_code) {});
    c->connection->AsyncReceive(c->in, [&, c](boost::system::error_code ec) {
      if (ec) {
        ++failed;
      } else if (c->in != c->out) {
        ++wrong;
      }
      if (++c->round < kMessages) {
        sendRound(c);
      } else if (++echoed == kConnections) {
        allEchoed.set_value();
      }
    });
  };
  for (int i = 0; i < kConnections; ++i) {
    auto c = std::make_shared<Client>();
    c->connection = clientSides[static_cast<std::size_t>(i)];
    c->index = i;
    drivers.push_back(c);
  }
  for (auto& c : drivers) sendRound(c);
  REQUIRE(allEchoed.get_future().wait_for(std::chrono::seconds(120)) == std::future_status::ready);
  CHECK(failed == 0);
  CHECK(wrong == 0);
  client.Close();
  server.Close();
  io.Stop();
}

TEST_CASE("an endpoint closed under live connections ends them with EndpointClosed",
          "[.][realtime][rudp][loopback][close]") {
  IoThreads io(2);
  auto server = std::make_unique<Endpoint>(io.Io(), kAnyLoopback, ServerOptions());
  Endpoint client(io.Io(), kAnyLoopback);
  auto [clientSide, serverSide] = ConnectPair(client, *server);
  std::promise<boost::system::error_code> serverEnded;
  serverSide->AsyncWaitClosed([&](boost::system::error_code ec) { serverEnded.set_value(ec); });
  std::vector<std::uint8_t> incoming;
  std::promise<boost::system::error_code> received;
  serverSide->AsyncReceive(incoming, [&](boost::system::error_code ec) { received.set_value(ec); });
  server.reset();  // destroys the endpoint while the connection object lives on
  auto reason = serverEnded.get_future();
  REQUIRE(reason.wait_for(kGenerous) == std::future_status::ready);
  CHECK(reason.get() == rudp::Error::EndpointClosed);
  auto receiveResult = received.get_future();
  REQUIRE(receiveResult.wait_for(kGenerous) == std::future_status::ready);
  CHECK(receiveResult.get() == rudp::Error::EndpointClosed);
  // Operations on the surviving object fail cleanly.
  std::promise<boost::system::error_code> sent;
  std::vector<std::uint8_t> one(1);
  serverSide->AsyncSend(boost::asio::buffer(one),
                        [&](boost::system::error_code ec) { sent.set_value(ec); });
  auto sendResult = sent.get_future();
  REQUIRE(sendResult.wait_for(kGenerous) == std::future_status::ready);
  CHECK(sendResult.get() == rudp::Error::EndpointClosed);
}

TEST_CASE("a vanished peer's port-unreachable errors do not stop the server socket",
          "[.][realtime][rudp][loopback]") {
  IoThreads io(1);
  Endpoint server(io.Io(), kAnyLoopback, ServerOptions());
  auto vanishing = std::make_unique<Endpoint>(io.Io(), kAnyLoopback);
  auto [goneSide, serverSide] = ConnectPair(*vanishing, server);
  goneSide.reset();
  vanishing.reset();  // its port closes without a word to the server

  // The server keeps sending to the closed port (ICMP port unreachable comes back; on Windows
  // that would surface as connection_reset on the server's next receive).
  std::vector<std::uint8_t> message(100, 0x11);
  for (int i = 0; i < 20; ++i) {
    serverSide->AsyncSend(boost::asio::buffer(message), [](boost::system::error_code) {});
  }

  // A new client still gets in and is served.
  Endpoint client(io.Io(), kAnyLoopback);
  auto [clientSide, newServerSide] = ConnectPair(client, server);
  auto stream = std::make_shared<MessageStream>(clientSide, newServerSide, 50);
  RunStream(stream);
  CHECK(stream->Error() == "");
  CHECK(stream->Received() == 50);
}

// A connection's completions run in order, one operation at a time (Endpoint.cpp, Shard::Post).
// A handler that throws ends io_context::run as Asio's handlers do; the completions queued after
// it still run, once each and in order, when the io_context runs again.
TEST_CASE("a handler that throws leaves the completions after it to run once each and in order",
          "[.][realtime][rudp][loopback]") {
  boost::asio::io_context io;
  auto server = std::make_unique<Endpoint>(io, kAnyLoopback, ServerOptions());
  auto client = std::make_unique<Endpoint>(io, kAnyLoopback);
  // Runs `io` on a thread of its own while it lives (connecting, and the endpoints' close).
  struct Runner {
    explicit Runner(boost::asio::io_context& context)
        : io(context), work(context.get_executor()), thread([this] { io.run(); }) {}
    ~Runner() {
      work.reset();
      io.stop();
      thread.join();
      io.restart();
    }
    boost::asio::io_context& io;
    std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
    std::thread thread;
  };
  std::shared_ptr<Connection> clientSide, serverSide;
  {
    const Runner running(io);
    std::tie(clientSide, serverSide) = ConnectPair(*client, *server);
  }

  // Three sends, each completing at once (copied into the send buffer) while nothing runs `io`:
  // their completions wait in the shard's queue, the first handler throws.
  std::vector<int> ran;
  const std::vector<std::uint8_t> message(10, 0x5a);
  for (int i = 1; i <= 3; ++i) {
    clientSide->AsyncSend(boost::asio::buffer(message), [&ran, i](boost::system::error_code) {
      ran.push_back(i);
      if (i == 1) throw std::runtime_error("handler 1");
    });
  }
  bool threw = false;
  const auto deadline = std::chrono::steady_clock::now() + kGenerous;
  while (ran.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    try {
      io.run_for(std::chrono::milliseconds(100));
    } catch (const std::runtime_error& error) {
      threw = std::string(error.what()) == "handler 1";
    }
    if (io.stopped()) io.restart();
  }
  CHECK(threw);
  CHECK(ran == std::vector<int>{1, 2, 3});

  const Runner closing(io);
  clientSide.reset();
  serverSide.reset();
  client.reset();
  server.reset();
}
