// The ReliableUDP soak: many connections exchanging messages through the impairment relay for a
// long time, sampled every few seconds. Fails if memory grows after warm-up, if any message is
// lost, reordered or corrupted, or if a timer leaks.
//
// Usage: ReliableUdpSoak [--minutes M] [--connections N] [--loss P] [--rate R] [--seed S]
//   defaults: 2 minutes (the test command's form), 1000 connections, 2 % loss per direction,
//   each connection sending 1 message per second (R) of 1 B to 8 KB. The documented long run:
//   ReliableUdpSoak --minutes 30
// Memory is read from /proc/self/statm (Linux); elsewhere it reads as 0 and is not judged.
#ifdef __linux__
#include <unistd.h>
#endif

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "Relay/ImpairmentRelay.h"
#include "ReliableUDP/Endpoint.h"
#include "TimerQueue/CountingTimerQueueMonitor.h"

using namespace timerwheel;
using Clock = std::chrono::steady_clock;
using Udp = boost::asio::ip::udp;

namespace {

std::size_t ResidentBytes() {
#ifdef __linux__
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
#else
  return 0;
#endif
}

// Message i of connection c: 4-byte index, 4-byte connection, then bytes derived from both.
std::size_t SizeOf(std::uint32_t index) { return 8 + (index * 2654435761u) % 8000; }
std::uint8_t ByteOf(std::uint32_t connection, std::uint32_t index, std::size_t at) {
  return static_cast<std::uint8_t>(connection * 31 + index * 17 + at);
}

std::atomic<std::uint64_t> g_problems{0};
std::atomic<std::uint64_t> g_messages{0};
std::atomic<std::uint64_t> g_bytes{0};

void Problem(const std::string& what) {
  if (g_problems++ < 10) std::fprintf(stderr, "PROBLEM: %s\n", what.c_str());
}

// One client connection's sender, driven by a steady_timer at `rate` messages per second.
// The io_context has two threads and an asio timer is not thread-safe: the timer's handlers and
// Stop run on one strand (Start runs before anything else can touch the timer).
class Sender : public std::enable_shared_from_this<Sender> {
 public:
  Sender(boost::asio::io_context& io, std::shared_ptr<rudp::Connection> connection,
         std::uint32_t id, double rate)
      : m_strand(boost::asio::make_strand(io)),
        m_timer(m_strand),
        m_connection(std::move(connection)),
        m_id(id),
        m_interval(std::chrono::microseconds(static_cast<long long>(1e6 / rate))) {}

  void Start(Clock::duration phase) {
    m_timer.expires_after(phase);
    Arm();
  }
  void Stop() {
    boost::asio::post(m_strand, [self = shared_from_this()] {
      self->m_stopped = true;
      self->m_timer.cancel();
    });
  }

 private:
  void Arm() {
    m_timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->m_stopped) return;
      self->SendOne();
      self->m_timer.expires_at(self->m_timer.expiry() + self->m_interval);
      self->Arm();
    });
  }
  void SendOne() {
    const std::uint32_t index = m_next++;
    auto message = std::make_shared<std::vector<std::uint8_t>>(SizeOf(index));
    std::memcpy(message->data(), &index, 4);
    std::memcpy(message->data() + 4, &m_id, 4);
    for (std::size_t at = 8; at < message->size(); ++at) (*message)[at] = ByteOf(m_id, index, at);
    m_connection->AsyncSend(boost::asio::buffer(*message), [message](boost::system::error_code ec) {
      if (ec && ec != rudp::Error::ClosedLocally && ec != rudp::Error::EndpointClosed) {
        Problem("send failed: " + ec.message());
      }
    });
  }

  boost::asio::strand<boost::asio::io_context::executor_type> m_strand;
  boost::asio::steady_timer m_timer;
  std::shared_ptr<rudp::Connection> m_connection;
  std::uint32_t m_id;
  Clock::duration m_interval;
  std::uint32_t m_next = 0;
  bool m_stopped = false;
};

// One server connection's reader: checks order, connection and contents of every message.
class Reader : public std::enable_shared_from_this<Reader> {
 public:
  explicit Reader(std::shared_ptr<rudp::Connection> connection)
      : m_connection(std::move(connection)) {}
  void Next() {
    m_connection->AsyncReceive(m_buffer, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) {
        if (ec != rudp::Error::ClosedByPeer && ec != rudp::Error::EndpointClosed &&
            ec != rudp::Error::ClosedLocally) {
          Problem("receive ended: " + ec.message());
        }
        return;
      }
      self->Check();
      self->Next();
    });
  }
  std::shared_ptr<rudp::Connection> connection() const { return m_connection; }

 private:
  void Check() {
    if (m_buffer.size() < 8) return Problem("short message");
    std::uint32_t index = 0, id = 0;
    std::memcpy(&index, m_buffer.data(), 4);
    std::memcpy(&id, m_buffer.data() + 4, 4);
    if (index == 0 && m_expected == 0) m_id = id;
    if (index != m_expected || id != m_id) {
      return Problem("message " + std::to_string(index) + " of connection " + std::to_string(id) +
                     " arrived, expected " + std::to_string(m_expected) + " of " +
                     std::to_string(m_id));
    }
    if (m_buffer.size() != SizeOf(index)) return Problem("wrong size");
    for (std::size_t at = 8; at < m_buffer.size(); ++at) {
      if (m_buffer[at] != ByteOf(id, index, at)) {
        return Problem("corrupted message " + std::to_string(index));
      }
    }
    ++m_expected;
    ++g_messages;
    g_bytes += m_buffer.size();
  }

  std::shared_ptr<rudp::Connection> m_connection;
  std::vector<std::uint8_t> m_buffer;
  std::uint32_t m_expected = 0;
  std::uint32_t m_id = 0;
};

}  // namespace

int main(int argc, char** argv) {
  double minutes = 2;
  std::size_t connections = 1000;
  double loss = 0.02;
  double rate = 1;
  std::uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    const char* value = argv[i + 1];
    if (option == "--minutes")
      minutes = std::atof(value);
    else if (option == "--connections")
      connections = static_cast<std::size_t>(std::atoll(value));
    else if (option == "--loss")
      loss = std::atof(value);
    else if (option == "--rate")
      rate = std::atof(value);
    else if (option == "--seed")
      seed = static_cast<std::uint64_t>(std::atoll(value));
    else {
      std::fprintf(stderr,
                   "usage: %s [--minutes M] [--connections N] [--loss P] [--rate R] [--seed S]\n",
                   argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "usage: %s [--minutes M] [--connections N] [--loss P] [--rate R]\n",
                 argv[0]);
    return 2;
  }

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { io.run(); });
  CountingTimerQueueMonitor serverTimers, clientTimers;
  int status = 0;
  {
    const Udp::endpoint loopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);
    rudp::EndpointOptions serverOptions;
    serverOptions.acceptIncoming = true;
    // Every connection comes from one loopback address: no admission limits (--connections N).
    serverOptions.maxConnectionsPerAddress = 0;
    serverOptions.maxConnectionsPerPrefix = 0;
    serverOptions.newConnectionsPerSecond = 0;
    serverOptions.maxConnections = connections + 10;
    serverOptions.acceptBacklog = connections + 10;
    serverOptions.timerMonitor = &serverTimers;
    rudp::EndpointOptions clientOptions;
    clientOptions.maxConnections = connections + 10;
    clientOptions.timerMonitor = &clientTimers;
    clientOptions.handshakeTimeout = 60'000;
    std::optional<rudp::Endpoint> server(std::in_place, io, loopback, serverOptions);
    relay::ImpairmentProfile path;
    path.loss = loss;
    path.delay = 5'000;
    path.jitter = 1'000;
    path.reorder = 0.01;
    path.duplicate = 0.01;
    std::optional<relay::ImpairmentRelay> relay(std::in_place, io, loopback,
                                                server->LocalEndpoint(), path, path, seed);
    std::optional<rudp::Endpoint> client(std::in_place, io, loopback, clientOptions);

    std::mutex mutex;
    std::vector<std::shared_ptr<Reader>> readers;
    std::vector<std::shared_ptr<Sender>> senders;
    std::function<void()> accept = [&] {
      server->AsyncAccept([&](boost::system::error_code ec, std::shared_ptr<rudp::Connection> c) {
        if (ec) return;
        auto reader = std::make_shared<Reader>(std::move(c));
        reader->Next();
        {
          std::lock_guard<std::mutex> lock(mutex);
          readers.push_back(reader);
        }
        accept();
      });
    };
    accept();
    std::atomic<std::size_t> connected{0}, failed{0};
    for (std::size_t i = 0; i < connections; ++i) {
      client->AsyncConnect(relay->LocalEndpoint(), [&, i](boost::system::error_code ec,
                                                          std::shared_ptr<rudp::Connection> c) {
        if (ec) {
          ++failed;
          Problem("connect failed: " + ec.message());
          return;
        }
        auto sender =
            std::make_shared<Sender>(io, std::move(c), static_cast<std::uint32_t>(i), rate);
        sender->Start(
            std::chrono::microseconds(static_cast<long long>(1e6 / rate * i / connections)));
        std::lock_guard<std::mutex> lock(mutex);
        senders.push_back(sender);
        ++connected;
      });
    }
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(minutes * 60);
    // Memory is judged in two windows after a warm-up quarter: the peak of the second quarter and
    // the peak of the second half. A leak climbs from one to the other; a one-off step (a stall on
    // a busy machine fills the bounded send queues once, and the allocator keeps the pages) does
    // not, as long as it happens before the second half.
    const auto warm = start + std::chrono::duration<double>(minutes * 60 / 4);
    const auto half = start + std::chrono::duration<double>(minutes * 60 / 2);
    std::size_t warmRss = 0, peakAfterWarm = 0;
    std::printf("%8s %8s %10s %12s %12s %10s %10s\n", "seconds", "open", "RSS MB", "messages", "MB",
                "timers", "problems");
    while (Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::seconds(5));  // sampling period, not synchronisation
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      const std::size_t rss = ResidentBytes();
      if (Clock::now() >= half) {
        peakAfterWarm = std::max(peakAfterWarm, rss);
      } else if (Clock::now() >= warm) {
        warmRss = std::max(warmRss, rss);
      }
      std::printf(
          "%8.0f %8llu %10.1f %12llu %12.1f %10llu %10llu\n", seconds,
          static_cast<unsigned long long>(server->GetStatistics().connectionsOpen),
          static_cast<double>(rss) / 1e6, static_cast<unsigned long long>(g_messages.load()),
          static_cast<double>(g_bytes.load()) / 1e6,
          static_cast<unsigned long long>(serverTimers.LiveTimers() + clientTimers.LiveTimers()),
          static_cast<unsigned long long>(g_problems.load()));
      std::fflush(stdout);
    }
    const std::size_t open = server->GetStatistics().connectionsOpen;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& sender : senders) sender->Stop();
      senders.clear();
      readers.clear();
    }
    client.reset();
    relay.reset();
    server.reset();
    const double growth =
        warmRss > 0 ? static_cast<double>(peakAfterWarm) / static_cast<double>(warmRss) : 1;
    std::printf(
        "connections %zu of %zu, messages %llu (%.1f MB), RSS peak in the second quarter %.1f MB, "
        "in the second half %.1f MB (x%.3f), problems %llu\n",
        open, connections, static_cast<unsigned long long>(g_messages.load()),
        static_cast<double>(g_bytes.load()) / 1e6, static_cast<double>(warmRss) / 1e6,
        static_cast<double>(peakAfterWarm) / 1e6, growth,
        static_cast<unsigned long long>(g_problems.load()));
    if (g_problems > 0) status = 1;
    if (open != connections) {
      std::printf("FAIL: %zu connections open at the end, expected %zu\n", open, connections);
      status = 1;
    }
    // After the warm-up the footprint may wobble, not climb.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // ASan's quarantine and TSan's shadow memory grow with the run whatever the program does:
    // under them the soak checks messages and timers, and reports memory without judging it.
    const bool judgeMemory = false;
#else
    const bool judgeMemory = true;
#endif
    if (judgeMemory && growth > 1.10 && peakAfterWarm - warmRss > (4u << 20)) {
      std::printf("FAIL: memory grew after warm-up\n");
      status = 1;
    }
  }
  work.reset();
  for (auto& thread : threads) thread.join();
  // Every connection ended and both endpoints are gone: every timer must have been destroyed.
  const auto leaked = serverTimers.LiveTimers() + clientTimers.LiveTimers();
  if (leaked != 0) {
    std::printf("FAIL: %llu timers leaked\n", static_cast<unsigned long long>(leaked));
    status = 1;
  }
  std::printf("%s\n", status == 0 ? "soak: OK" : "soak: FAILED");
  return status;
}
