// Sends a file over ReliableUDP and prints the throughput.
//
//   ReliableUdpFileTransfer receive <port> <output-file>        waits for one file, then exits
//   ReliableUdpFileTransfer send <host> <port> <input-file>     sends it
//   ReliableUdpFileTransfer demo [megabytes]                    both, in one process, on loopback
//   ... --cc bbr|newreno|none (before the mode)  the congestion controller (default bbr)
//
// The file goes as messages of up to 64 KB after a first message holding its size; the sender
// closes gracefully, which delivers everything before the receiver sees ClosedByPeer.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ReliableUDP/Endpoint.h"

namespace {

using timerwheel::rudp::Connection;
using timerwheel::rudp::Endpoint;
using timerwheel::rudp::EndpointOptions;
using Udp = boost::asio::ip::udp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kChunk = 64 * 1024;

double Seconds(Clock::duration elapsed) { return std::chrono::duration<double>(elapsed).count(); }

// [readme]
// Receiver: accept one connection, write every message after the first (the size) to `out`,
// finish when the sender closes.
class Receiver : public std::enable_shared_from_this<Receiver> {
 public:
  Receiver(Endpoint& endpoint, std::ostream& out) : m_endpoint(endpoint), m_out(out) {}

  std::future<std::uint64_t> Start() {
    m_endpoint.AsyncAccept([self = shared_from_this()](boost::system::error_code ec,
                                                       std::shared_ptr<Connection> connection) {
      if (ec) return self->m_done.set_value(0);
      self->m_connection = std::move(connection);
      self->ReceiveNext();
    });
    return m_done.get_future();
  }

 private:
  void ReceiveNext() {
    m_connection->AsyncReceive(
        m_message, [self = shared_from_this()](boost::system::error_code ec) {
          if (ec) {  // ClosedByPeer once everything has arrived
            if (ec != timerwheel::rudp::Error::ClosedByPeer) std::cerr << ec.message() << "\n";
            return self->m_done.set_value(self->m_received);
          }
          if (self->m_first) {
            self->m_first = false;
            self->m_start = Clock::now();
          } else {
            self->m_out.write(reinterpret_cast<const char*>(self->m_message.data()),
                              static_cast<std::streamsize>(self->m_message.size()));
            self->m_received += self->m_message.size();
          }
          self->ReceiveNext();
        });
  }

  Endpoint& m_endpoint;
  std::ostream& m_out;
  std::shared_ptr<Connection> m_connection;
  std::vector<std::uint8_t> m_message;
  bool m_first = true;
  Clock::time_point m_start;
  std::uint64_t m_received = 0;
  std::promise<std::uint64_t> m_done;
};

// Sender: connect, send the size, then the file in 64 KB messages, then close gracefully.
std::uint64_t SendFile(Endpoint& endpoint, const Udp::endpoint& to, std::istream& in) {
  std::promise<std::shared_ptr<Connection>> connected;
  endpoint.AsyncConnect(to, [&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
    if (ec) std::cerr << "connect: " << ec.message() << "\n";
    connected.set_value(std::move(c));
  });
  std::shared_ptr<Connection> connection = connected.get_future().get();
  if (!connection) return 0;

  std::vector<std::uint8_t> header(8, 0), chunk(kChunk);
  std::uint64_t sent = 0;
  auto sendAndWait = [&](const std::vector<std::uint8_t>& message, std::size_t size) {
    std::promise<boost::system::error_code> done;  // completes once copied: back-pressure
    connection->AsyncSend(boost::asio::buffer(message.data(), size),
                          [&](boost::system::error_code ec) { done.set_value(ec); });
    return done.get_future().get();
  };
  if (sendAndWait(header, header.size())) return 0;
  while (in.read(reinterpret_cast<char*>(chunk.data()), kChunk) || in.gcount() > 0) {
    const auto size = static_cast<std::size_t>(in.gcount());
    if (auto ec = sendAndWait(chunk, size)) {
      std::cerr << "send: " << ec.message() << "\n";
      return sent;
    }
    sent += size;
  }
  std::promise<boost::system::error_code> closed;
  connection->AsyncWaitClosed([&](boost::system::error_code ec) { closed.set_value(ec); });
  connection->Close();  // returns at once; the wait ends when the peer has acknowledged all
  const auto reason = closed.get_future().get();
  if (reason != timerwheel::rudp::Error::ClosedLocally) std::cerr << reason.message() << "\n";
  // The controller's model at the end: estimated bandwidth, min RTT, losses, time per phase.
  std::printf("%s\n", timerwheel::rudp::DescribeCongestion(connection->GetStatistics()).c_str());
  return sent;
}
// [/readme]

// Runs an io_context on one thread for as long as the object lives.
class IoThread {
 public:
  IoThread() : m_work(m_io.get_executor()), m_thread([this] { m_io.run(); }) {}
  ~IoThread() {
    m_work.reset();
    m_thread.join();
  }
  boost::asio::io_context& Io() { return m_io; }

 private:
  boost::asio::io_context m_io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> m_work;
  std::thread m_thread;
};

void Report(const char* what, std::uint64_t bytes, Clock::duration elapsed) {
  std::printf("%s %.1f MB in %.3f s: %.1f MB/s\n", what, static_cast<double>(bytes) / 1e6,
              Seconds(elapsed), static_cast<double>(bytes) / 1e6 / Seconds(elapsed));
}

int Receive(unsigned short port, const std::string& path, EndpointOptions options) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return std::fprintf(stderr, "cannot write %s\n", path.c_str()), 1;
  IoThread io;
  options.acceptIncoming = true;
  Endpoint endpoint(io.Io(), Udp::endpoint(Udp::v4(), port), options);
  std::printf("receiving on port %u\n", static_cast<unsigned>(endpoint.LocalEndpoint().port()));
  const auto start = Clock::now();
  const std::uint64_t bytes = std::make_shared<Receiver>(endpoint, out)->Start().get();
  Report("received", bytes, Clock::now() - start);
  return bytes > 0 ? 0 : 1;
}

int Send(const std::string& host, unsigned short port, const std::string& path,
         const EndpointOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::fprintf(stderr, "cannot read %s\n", path.c_str()), 1;
  IoThread io;
  Endpoint endpoint(io.Io(), Udp::endpoint(Udp::v4(), 0), options);
  const auto start = Clock::now();
  const std::uint64_t bytes =
      SendFile(endpoint, Udp::endpoint(boost::asio::ip::make_address(host), port), in);
  Report("sent", bytes, Clock::now() - start);
  return bytes > 0 ? 0 : 1;
}

// Both ends in one process over loopback: generates `megabytes` of data, checks it arrives.
int Demo(std::size_t megabytes, EndpointOptions options) {
  std::string data(megabytes * 1000 * 1000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 131) >> 3);
  std::istringstream in(data);
  std::ostringstream out;
  IoThread receiverIo, senderIo;
  const Udp::endpoint loopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);
  Endpoint senderEndpoint(senderIo.Io(), loopback, options);
  options.acceptIncoming = true;
  Endpoint receiverEndpoint(receiverIo.Io(), loopback, options);
  auto received = std::make_shared<Receiver>(receiverEndpoint, out)->Start();
  const auto start = Clock::now();
  const std::uint64_t sent = SendFile(senderEndpoint, receiverEndpoint.LocalEndpoint(), in);
  const std::uint64_t bytes = received.get();
  const auto elapsed = Clock::now() - start;
  Report("loopback transfer:", bytes, elapsed);
  if (sent != data.size() || out.str() != data) {
    std::fprintf(stderr, "FAILED: %llu bytes sent, %llu received, contents %s\n",
                 static_cast<unsigned long long>(sent), static_cast<unsigned long long>(bytes),
                 out.str() == data ? "equal" : "differ");
    return 1;
  }
  return 0;
}

// "bbr", "newreno" or "none" (the known-path profile) into `controller`; false if none of them.
bool ParseController(const std::string& name, timerwheel::rudp::CongestionControl& controller) {
  using timerwheel::rudp::CongestionControl;
  if (name == "bbr") return controller = CongestionControl::Bbr, true;
  if (name == "newreno") return controller = CongestionControl::NewReno, true;
  if (name == "none") return controller = CongestionControl::None, true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  EndpointOptions options;
  int first = 1;  // the mode's index, after the options
  bool understood = true;
  if (argc > 2 && std::string(argv[1]) == "--cc") {
    understood = ParseController(argv[2], options.congestionControl);
    first = 3;
  }
  const int args = argc - first;  // the mode and its arguments
  const std::string mode = args > 0 ? argv[first] : "demo";
  if (understood && mode == "receive" && args == 3) {
    return Receive(static_cast<unsigned short>(std::stoi(argv[first + 1])), argv[first + 2],
                   options);
  }
  if (understood && mode == "send" && args == 4) {
    return Send(argv[first + 1], static_cast<unsigned short>(std::stoi(argv[first + 2])),
                argv[first + 3], options);
  }
  if (understood && mode == "demo" && args <= 2) {
    return Demo(args == 2 ? std::stoul(argv[first + 1]) : 20, options);
  }
  std::fprintf(stderr,
               "usage: %s [--cc bbr|newreno|none] receive <port> <output-file>\n"
               "       %s [--cc bbr|newreno|none] send <host> <port> <input-file>\n"
               "       %s [--cc bbr|newreno|none] demo [megabytes]\n",
               argv[0], argv[0], argv[0]);
  return 2;
}
