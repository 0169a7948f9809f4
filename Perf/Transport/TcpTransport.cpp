// TcpTransport: length-framed messages over one loopback TCP connection with Boost.Asio.
#include "Transport/TcpTransport.h"

#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "Transport/DeliveryTrackingTransport.h"
#include "Transport/IoThread.h"

namespace timerwheel::perf {
namespace {

using Tcp = boost::asio::ip::tcp;

constexpr std::size_t kHeaderSize = 4;
// Bytes framed but not yet written to the socket before Send blocks. The socket's own buffer
// is the real back-pressure (a write completes once the kernel has taken the bytes); this only
// keeps the queue in front of it from growing without bound. 256 KB batches many small messages
// into one write.
constexpr std::size_t kMaxQueuedBytes = 256 * 1024;
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr auto kConnectTimeout = std::chrono::seconds(10);

Tcp::endpoint Loopback(std::uint16_t port) {
  return {boost::asio::ip::address_v4::loopback(), port};
}

class TcpTransport final : public DeliveryTrackingTransport {
 public:
  TcpTransport() = default;
  ~TcpTransport() override { Stop(); }

  std::string Name() const override { return "TCP"; }
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  std::uint16_t StartServer(MessageHandler onMessage) override {
    m_onMessage = std::move(onMessage);
    m_serverIo = std::make_unique<IoThread>();
    m_acceptor.emplace(m_serverIo->Io(), Loopback(0));
    // Touched by this thread only until the accept is started; from then on the acceptor and the
    // server's socket belong to the server's io thread.
    const std::uint16_t port = m_acceptor->local_endpoint().port();
    m_acceptor->async_accept([this](boost::system::error_code ec, Tcp::socket socket) {
      if (ec) return;  // operation_aborted: stopped before anyone connected
      m_serverSocket.emplace(std::move(socket));
      m_acceptor->close();  // one connection only
      m_readBuffer.resize(kReadChunk);
      ReadMore();
    });
    return port;
  }

  void Connect(std::uint16_t port) override {
    m_clientIo = std::make_unique<IoThread>();
    m_clientSocket.emplace(m_clientIo->Io());
    auto promise = std::make_shared<std::promise<boost::system::error_code>>();
    std::future<boost::system::error_code> future = promise->get_future();
    m_clientSocket->async_connect(Loopback(port), [this, promise](boost::system::error_code ec) {
      if (!ec) m_clientSocket->set_option(Tcp::no_delay(true), ec);
      promise->set_value(ec);
    });
    if (future.wait_for(kConnectTimeout) != std::future_status::ready) {
      // Cancels the connect on the socket's own thread; its handler still runs.
      boost::asio::post(m_clientIo->Io(), [this] {
        boost::system::error_code ignored;
        m_clientSocket->close(ignored);
      });
    }
    if (const boost::system::error_code ec = future.get()) {
      throw std::runtime_error("TCP: cannot connect to 127.0.0.1:" + std::to_string(port) + ": " +
                               ec.message());
    }
    m_connected = true;
  }

  bool Send(const std::uint8_t* data, std::size_t size) override {
    if (!m_connected) return false;
    const std::size_t frameSize = kHeaderSize + size;
    std::unique_lock<std::mutex> lock(m_mutex);
    // A frame larger than the whole limit still goes, alone, once the queue is empty.
    m_changed.wait(lock, [&] {
      return m_failed || m_queuedBytes == 0 || m_queuedBytes + frameSize <= kMaxQueuedBytes;
    });
    if (m_failed) return false;
    const std::uint8_t header[kHeaderSize] = {
        static_cast<std::uint8_t>(size >> 24), static_cast<std::uint8_t>(size >> 16),
        static_cast<std::uint8_t>(size >> 8), static_cast<std::uint8_t>(size)};
    m_pending.insert(m_pending.end(), header, header + kHeaderSize);
    m_pending.insert(m_pending.end(), data, data + size);
    m_queuedBytes += frameSize;
    ++m_messagesSent;
    if (!m_writing) {
      m_writing = true;
      boost::asio::post(m_clientIo->Io(), [this] { WriteNext(); });
    }
    return true;
  }

  TransportCounters ClientCounters() override {
    std::lock_guard<std::mutex> lock(m_mutex);
    TransportCounters counters;
    counters.wireBytesSent = m_wireBytesSent;
    return counters;
  }

  void Stop() override {
    if (m_stopped) return;  // Stop and the destructor run on the benchmark's thread only
    m_stopped = true;
    m_connected = false;  // Send fails from now on
    // Each socket is closed on its own io thread, since Asio objects are not thread-safe; the
    // pending operations then complete with operation_aborted (or end of file on the server),
    // and run() returns once their handlers have run.
    if (m_clientIo) {
      boost::asio::post(m_clientIo->Io(), [this] {
        boost::system::error_code ignored;
        m_clientSocket->shutdown(Tcp::socket::shutdown_both, ignored);
        m_clientSocket->close(ignored);
      });
      m_clientIo->Finish();
      m_clientSocket.reset();
      m_clientIo.reset();
    }
    if (m_serverIo) {
      boost::asio::post(m_serverIo->Io(), [this] {
        boost::system::error_code ignored;
        m_acceptor->close(ignored);
        if (m_serverSocket) m_serverSocket->close(ignored);
      });
      m_serverIo->Finish();
      m_serverSocket.reset();
      m_acceptor.reset();
      m_serverIo.reset();
    }
  }

 private:
  // Client io thread: writes everything framed so far in one write, then whatever was framed
  // meanwhile, until the queue is empty.
  void WriteNext() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      if (m_pending.empty() || m_failed) {
        m_writing = false;
        return;
      }
      m_writing = true;
      std::swap(m_pending, m_writeBuffer);  // m_writeBuffer was empty: its capacity is reused
    }
    boost::asio::async_write(*m_clientSocket, boost::asio::buffer(m_writeBuffer),
                             [this](boost::system::error_code ec, std::size_t written) {
                               {
                                 std::lock_guard<std::mutex> lock(m_mutex);
                                 m_wireBytesSent += written;
                                 m_queuedBytes -= m_writeBuffer.size();
                                 if (ec) m_failed = true;
                                 m_writeBuffer.clear();
                               }
                               m_changed.notify_all();
                               WriteNext();
                             });
  }

  // Server io thread: reads what the socket has and hands every complete frame to onMessage.
  void ReadMore() {
    if (m_readEnd == m_readBuffer.size()) m_readBuffer.resize(m_readBuffer.size() * 2);
    m_serverSocket->async_read_some(
        boost::asio::buffer(m_readBuffer.data() + m_readEnd, m_readBuffer.size() - m_readEnd),
        [this](boost::system::error_code ec, std::size_t read) {
          if (ec) return;  // end of file at Stop, or operation_aborted
          m_readEnd += read;
          DeliverFrames();
          ReadMore();
        });
  }

  void DeliverFrames() {
    std::size_t start = 0;
    std::uint64_t delivered = 0;
    while (m_readEnd - start >= kHeaderSize) {
      const std::uint8_t* header = m_readBuffer.data() + start;
      const std::size_t size = (std::size_t{header[0]} << 24) | (std::size_t{header[1]} << 16) |
                               (std::size_t{header[2]} << 8) | std::size_t{header[3]};
      if (m_readEnd - start < kHeaderSize + size) break;
      m_onMessage(header + kHeaderSize, size);
      start += kHeaderSize + size;
      ++delivered;
    }
    // Keep the partial frame at the front; ReadMore grows the buffer if one frame fills it.
    std::memmove(m_readBuffer.data(), m_readBuffer.data() + start, m_readEnd - start);
    m_readEnd -= start;
    if (delivered > 0) {
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_messagesDelivered += delivered;
      }
      m_changed.notify_all();
    }
  }

  // Server side: after StartServer, touched on the server's io thread only.
  MessageHandler m_onMessage;
  std::unique_ptr<IoThread> m_serverIo;
  std::optional<Tcp::acceptor> m_acceptor;
  std::optional<Tcp::socket> m_serverSocket;
  std::vector<std::uint8_t> m_readBuffer;
  std::size_t m_readEnd = 0;

  // Client side: the socket is used on the client's io thread only; m_writeBuffer is the write in
  // progress (swapped in under the mutex, then the io thread's alone).
  std::unique_ptr<IoThread> m_clientIo;
  std::optional<Tcp::socket> m_clientSocket;
  std::vector<std::uint8_t> m_writeBuffer;
  bool m_connected = false;  // benchmark thread
  bool m_stopped = false;    // benchmark thread

  // Shared between the benchmark's thread and both io threads, under m_mutex; m_changed is also
  // notified when bytes are written.
  std::vector<std::uint8_t> m_pending;  // framed, not yet handed to a write
  std::size_t m_queuedBytes = 0;        // m_pending plus the write in progress
  bool m_writing = false;               // a WriteNext is posted or its write is in progress
  std::uint64_t m_wireBytesSent = 0;
};

}  // namespace

std::unique_ptr<ITransportUnderTest> MakeTcpTransport() { return std::make_unique<TcpTransport>(); }

}  // namespace timerwheel::perf
