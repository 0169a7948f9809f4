// ReliableUDP's steady-state datagram path allocates nothing: counted with a replaced global
// operator new (Support/AllocationCounter.cpp).
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/Detail/RoomForOne.h"
#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/EngineConversions.h"
#include "ReliableUDP/LockedEngine.h"
#include "Support/AllocationCounter.h"
#include "TimerWheel/TimerWheel.h"

using timerwheel::test::CountAllocations;

namespace {

using timerwheel::rudp::detail::Microseconds;
using Udp = boost::asio::ip::udp;

// Two sans-I/O endpoints joined by preallocated datagram and handler queues, with a manual
// clock: nothing here allocates once the queues have their capacity, so every allocation the
// counter sees comes from the transport.
class AllocationFreeLink {
 public:
  class Side final : public timerwheel::rudp::detail::IEndpointIo {
   public:
    Side(AllocationFreeLink& link, unsigned short port)
        : m_link(link), m_address(boost::asio::ip::make_address_v4("127.0.0.1"), port) {}
    void SendDatagram(const timerwheel::rudp::detail::Address& to, const std::uint8_t* data,
                      std::size_t size) override {
      m_link.Queue(m_address, timerwheel::rudp::detail::ToUdpEndpoint(to), data, size);
    }
    Microseconds Now() const override { return m_link.m_now; }
    void Post(timerwheel::rudp::detail::Completion& handler,
              timerwheel::rudp::detail::EngineError error) override {
      timerwheel::rudp::detail::MakeRoomForOne(
          m_link.m_posted);  // a failed post leaves the handler (the contract)
      m_link.m_posted.push_back({std::move(handler), error});
    }
    const Udp::endpoint& Address() const { return m_address; }

   private:
    AllocationFreeLink& m_link;
    Udp::endpoint m_address;
  };

  class Ticks final : public timerwheel::ITickProvider {
   public:
    explicit Ticks(const AllocationFreeLink& link) : m_link(link) {}
    timerwheel::Ticks GetTickCount() const override { return m_link.m_now / 1000; }

   private:
    const AllocationFreeLink& m_link;
  };

  AllocationFreeLink() : ticks(*this) {
    m_datagrams.resize(4096);
    for (auto& datagram : m_datagrams) datagram.bytes.reserve(2048);
    m_posted.reserve(4096);
    m_running.reserve(4096);
  }

  void Queue(const Udp::endpoint& from, const Udp::endpoint& to, const std::uint8_t* data,
             std::size_t size) {
    REQUIRE(m_count < m_datagrams.size());
    auto& datagram = m_datagrams[m_count++];
    datagram.from = from;
    datagram.to = to;
    datagram.bytes.assign(data, data + size);
  }

  // Delivers what was sent, runs handlers, and moves time on by `step` running due timers.
  template <class Deliver>
  void Step(Deliver&& deliver, timerwheel::IManageTimerQueue& a, timerwheel::IManageTimerQueue& b,
            Microseconds step) {
    for (int round = 0; round < 16 && (m_count > 0 || !m_posted.empty()); ++round) {
      // Deliver a snapshot: delivery may queue replies (appended after it).
      const std::size_t count = m_count;
      for (std::size_t i = 0; i < count; ++i) deliver(m_datagrams[i]);
      // Keep the replies, in order, at the front.
      for (std::size_t i = count; i < m_count; ++i)
        std::swap(m_datagrams[i - count], m_datagrams[i]);
      m_count -= count;
      m_running.swap(m_posted);
      for (auto& posted : m_running) posted.handler(posted.error);
      m_running.clear();
    }
    m_now += step;
    a.HandleTimeouts();
    b.HandleTimeouts();
  }

  struct Datagram {
    Udp::endpoint from, to;
    std::vector<std::uint8_t> bytes;
  };
  struct Posted {
    timerwheel::rudp::detail::Completion handler;
    timerwheel::rudp::detail::EngineError error;
  };

  Microseconds m_now = 1'000'000'000'000;
  Ticks ticks;
  std::vector<Datagram> m_datagrams;
  std::size_t m_count = 0;
  std::vector<Posted> m_posted, m_running;
};

}  // namespace

TEST_CASE("ReliableUDP's steady-state datagram path allocates nothing once warm",
          "[rudp][allocation]") {
  using namespace timerwheel;
  AllocationFreeLink link;
  AllocationFreeLink::Side clientIo(link, 1), serverIo(link, 2);
  TimerWheelOptions wheelOptions;
  wheelOptions.granularity = 1;
  TimerWheel clientTimers(wheelOptions, link.ticks), serverTimers(wheelOptions, link.ticks);
  // Encrypted too (issue 20): packets are sealed and opened in place, in the endpoint's buffers.
  const bool encrypted = GENERATE(false, true);
  CAPTURE(encrypted);
  const rudp::ServerKeyPair key = rudp::MakeServerKeyPair();
  rudp::EndpointOptions serverOptions;
  serverOptions.acceptIncoming = true;
  rudp::EndpointOptions clientOptions;
  if (encrypted) {
    serverOptions.serverSecretKey = key.secretKey;
    clientOptions.serverPublicKey = key.publicKey;
  }
  serverOptions = rudp::ValidateOptions(serverOptions);
  clientOptions = rudp::ValidateOptions(clientOptions);
  // LockedEngine because the public Connection takes its lock; the link calls the engines
  // directly (one thread).
  auto client =
      std::make_shared<rudp::detail::LockedEngine>(clientIo, clientTimers, 1, clientOptions);
  auto server =
      std::make_shared<rudp::detail::LockedEngine>(serverIo, serverTimers, 1, serverOptions);

  std::shared_ptr<rudp::detail::ConnectionCore> clientState, serverState;
  client->Core().Connect(
      rudp::detail::ToAddress(serverIo.Address()),
      [&](rudp::detail::EngineError, auto state) { clientState = std::move(state); });
  server->Core().Accept(
      [&](rudp::detail::EngineError, auto state) { serverState = std::move(state); });
  auto deliver = [&](const AllocationFreeLink::Datagram& datagram) {
    auto& core = datagram.to == serverIo.Address() ? server->Core() : client->Core();
    core.OnDatagram(rudp::detail::ToAddress(datagram.from), datagram.bytes.data(),
                    datagram.bytes.size());
  };
  for (int i = 0; i < 100 && !(clientState && serverState); ++i) {
    link.Step(deliver, clientTimers, serverTimers, 1000);
  }
  REQUIRE(clientState);
  REQUIRE(serverState);
  rudp::Connection clientSide(client, clientState), serverSide(server, serverState);

  // A request/response exchange of 300-byte messages, one per millisecond each way.
  std::vector<std::uint8_t> request(300, 0x21), response(300, 0x42), atServer, atClient;
  atServer.reserve(1024);
  atClient.reserve(1024);
  std::size_t exchanged = 0;
  auto exchange = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) {
      clientSide.AsyncSend(boost::asio::buffer(request), [](boost::system::error_code) {});
      serverSide.AsyncReceive(atServer, [&](boost::system::error_code ec) {
        if (ec) return;
        serverSide.AsyncSend(boost::asio::buffer(response), [](boost::system::error_code) {});
      });
      clientSide.AsyncReceive(atClient, [&](boost::system::error_code ec) {
        if (!ec) ++exchanged;
      });
      link.Step(deliver, clientTimers, serverTimers, 1000);
      link.Step(deliver, clientTimers, serverTimers, 1000);
    }
  };
  exchange(3000);  // warm up: pools, rings and range sets reach their high-water marks
  const std::size_t warm = exchanged;
  std::size_t allocations = 0;
  {
    CountAllocations counting;
    exchange(3000);
    allocations = counting.Count();
  }
  CHECK(exchanged - warm == 3000);
  CHECK(allocations == 0);
  CHECK(atClient == response);
  CHECK(clientState->IsEncrypted() == encrypted);
}

#ifdef __linux__  // the batched socket path (recvmmsg, sendmmsg, GSO, GRO) is Linux's
TEST_CASE("the batched socket path allocates nothing per datagram once warm",
          "[rudp][allocation][batched][loopback]") {
  using namespace timerwheel;
  // Real endpoints on loopback, their io_context run by this thread (the counter counts this
  // thread's allocations): the socket's waits, the posted completions and flushes, and the timer
  // driver's re-aims (pacer wake-ups, delayed ACKs) are Asio operations, whose memory the
  // endpoint and the driver recycle (detail::HandlerMemory). Exchanges of 5 datagrams, then of
  // 50 (GSO runs), each measured after a warm-up at its size: nothing is allocated per datagram
  // or per operation (before the recycling, about 5 per exchange: 2,500 per phase).
  // With pacing (the default controller) and without (the known-path profile): how many pacer
  // wake-ups an exchange needs depends on how fast the machine runs, and none may allocate.
  const rudp::CongestionControl controller =
      GENERATE(rudp::CongestionControl::None, rudp::EndpointOptions().congestionControl);
  CAPTURE(static_cast<int>(controller));
  boost::asio::io_context io;
  const Udp::endpoint loopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);
  rudp::EndpointOptions clientOptions;
  clientOptions.congestionControl = controller;
  rudp::EndpointOptions serverOptions = clientOptions;
  serverOptions.acceptIncoming = true;
  rudp::Endpoint server(io, loopback, serverOptions);
  rudp::Endpoint client(io, loopback, clientOptions);
  std::shared_ptr<rudp::Connection> clientSide, serverSide;
  server.AsyncAccept([&](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
    serverSide = std::move(c);
  });
  client.AsyncConnect(server.LocalEndpoint(),
                      [&](boost::system::error_code, std::shared_ptr<rudp::Connection> c) {
                        clientSide = std::move(c);
                      });
  while (!(clientSide && serverSide)) io.run_one();

  std::vector<std::uint8_t> response(300, 0x42), atServer, atClient;
  atServer.reserve(65536);
  atClient.reserve(1024);
  std::size_t exchanged = 0;
  auto exchange = [&](const std::vector<std::uint8_t>& request, int rounds) {
    for (int i = 0; i < rounds; ++i) {
      bool answered = false;
      clientSide->AsyncSend(boost::asio::buffer(request), [](boost::system::error_code) {});
      serverSide->AsyncReceive(atServer, [&](boost::system::error_code ec) {
        if (ec) return;
        serverSide->AsyncSend(boost::asio::buffer(response), [](boost::system::error_code) {});
      });
      clientSide->AsyncReceive(atClient, [&](boost::system::error_code ec) {
        answered = true;
        if (!ec) ++exchanged;
      });
      while (!answered) io.run_one();
    }
  };
  struct Phase {
    std::size_t allocations = 0;
    std::uint64_t datagrams = 0;  // sent by both ends
  };
  auto measure = [&](const std::vector<std::uint8_t>& request) {
    exchange(request, 500);  // warm up at this size
    const auto sent = [&] {
      return client.GetStatistics().datagramsSent + server.GetStatistics().datagramsSent;
    };
    const std::uint64_t before = sent();
    Phase phase;
    {
      CountAllocations counting;
      exchange(request, 500);
      phase.allocations = counting.Count();
    }
    phase.datagrams = sent() - before;
    return phase;
  };
  // 6,000 bytes: five full datagrams and a short one (a GSO run); 60,000 bytes: ten times that.
  const Phase small = measure(std::vector<std::uint8_t>(6000, 0x21));
  const Phase large = measure(std::vector<std::uint8_t>(60000, 0x21));
  INFO("allocations " << small.allocations << " for " << small.datagrams << " datagrams, "
                      << large.allocations << " for " << large.datagrams);
  CHECK(exchanged == 2000);
  CHECK(large.datagrams >= 5 * small.datagrams);
  // Not exactly 0 in every run: this is real time, and a late wake-up can take a high-water mark
  // past the warm-up's (more timers due in one dispatch than ever before: the wheel's batch
  // vector; a probe timeout: a range set; more operations outstanding at once: one more block of
  // handler memory), each a geometric growth or one block, never per datagram: 0-2 per phase in
  // 30 release runs, up to 14 when this suite also ran under TSan, whose slowness makes late
  // wake-ups common. One per exchange (a per-operation allocation) would be 500.
  constexpr std::size_t kHighWaterGrowths = 32;
  CHECK(small.allocations <= kHighWaterGrowths);
  CHECK(large.allocations <= kHighWaterGrowths);
  CHECK(atClient == response);
  const rudp::EndpointStatistics stats = client.GetStatistics();
  CHECK(stats.sendSystemCalls < stats.datagramsSent);  // it was the batched path
  clientSide.reset();
  serverSide.reset();
  client.Close();
  server.Close();
  io.poll();
}
#endif
