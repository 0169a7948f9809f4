// Endpoint: the Boost.Asio socket, clock and timer driver around the sans-I/O EndpointCore.
//
// Ground rules (locking): the core's mutex guards the core, every connection, and every
// operation on the socket (receive initiation, the non-blocking receive drain, sends, close), so
// the socket is never used from two threads at once. The timer driver dispatches without its own
// lock; its callbacks take the core's mutex (lock order: core, then driver).
#include "ReliableUDP/Endpoint.h"

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/EndpointCore.h"
#include "TimerQueue/AsioTimerQueue.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"

#ifdef _WIN32
#include <mswsock.h>
#include <winsock2.h>
#ifndef SIO_UDP_CONNRESET
#define SIO_UDP_CONNRESET _WSAIOW(IOC_VENDOR, 12)
#endif
#endif

namespace timerwheel::rudp {
namespace {

using Udp = boost::asio::ip::udp;

// Datagrams waiting for the socket when a send would block; beyond this they are dropped and
// counted (loss recovery resends what they carried).
constexpr std::size_t kMaxQueuedDatagrams = 4096;
// Datagrams read per wake-up before the receive is re-armed: amortises the completion.
constexpr int kReceiveBatch = 64;

// One clock for the transport (microseconds) and the timer queue (milliseconds), so a timer
// aimed at ceil(deadline) never fires before the deadline (see IEndpointIo::Now). Windows'
// GetTickCount64 moves in 15.6 ms steps; steady_clock (QueryPerformanceCounter) does not.
class TransportClock final : public ITickProvider {
 public:
  static detail::Microseconds Now() {
    using namespace std::chrono;
    return static_cast<detail::Microseconds>(
        duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count());
  }
  Ticks GetTickCount() const override { return Now() / 1000; }
};

bool IsBenignReceiveError(const boost::system::error_code& error) {
  // ICMP errors from earlier sends (Windows reports port unreachable on the next receive).
  return error == boost::asio::error::connection_reset ||
         error == boost::asio::error::connection_refused ||
         error == boost::asio::error::network_unreachable ||
         error == boost::asio::error::host_unreachable || error == boost::asio::error::message_size;
}

}  // namespace

class Endpoint::State final : public detail::IEndpointIo,
                              public std::enable_shared_from_this<State> {
 public:
  State(boost::asio::io_context& ioContext, const Udp::endpoint& local,
        const EndpointOptions& options)
      : m_ioContext(ioContext), m_socket(ioContext) {
    m_socket.open(local.protocol());
    m_socket.bind(local);
    m_socket.non_blocking(true);
    boost::system::error_code ignored;  // the OS may cap these; it is not an error
    m_socket.set_option(Udp::socket::receive_buffer_size(options.socketReceiveBufferSize), ignored);
    m_socket.set_option(Udp::socket::send_buffer_size(options.socketSendBufferSize), ignored);
#ifdef _WIN32
    BOOL reportConnectionReset = FALSE;
    DWORD bytesReturned = 0;
    ::WSAIoctl(m_socket.native_handle(), SIO_UDP_CONNRESET, &reportConnectionReset,
               sizeof reportConnectionReset, nullptr, 0, &bytesReturned, nullptr, nullptr);
#endif
    const Milliseconds maximumTimeout =
        std::max<Milliseconds>({60'000, 2 * options.idleTimeout, options.handshakeTimeout});
    if (options.timerQueue == TimerQueueKind::Wheel) {
      TimerWheelOptions wheel;
      wheel.maximumTimeout = maximumTimeout;
      wheel.granularity = options.timerGranularity;
      wheel.monitor = options.timerMonitor;
      m_queue = std::make_unique<TimerWheel>(wheel, m_clock);
      m_granularity = options.timerGranularity;
    } else {
      TimerQueueOptions heap;
      heap.monitor = options.timerMonitor;
      m_queue = std::make_unique<TimerQueue>(heap, m_clock);
      m_granularity = 1;
    }
    AsioTimerQueueOptions driver;
    driver.dispatchPolicy = DispatchPolicy::WithoutLock;  // callbacks take the core's lock
    driver.monitor = options.timerMonitor;
    m_timers = std::make_unique<AsioTimerQueue>(ioContext, *m_queue, driver);
    m_core.emplace(*this, *m_timers, m_granularity, options);
  }

  ~State() { Close(); }

  void Start() {
    std::lock_guard<std::mutex> lock(m_core->Mutex());
    StartReceiveLocked();
  }

  detail::EndpointCore& Core() { return *m_core; }

  std::shared_ptr<detail::EndpointCore> SharedCore() {
    return std::shared_ptr<detail::EndpointCore>(shared_from_this(), &*m_core);
  }

  Udp::endpoint LocalEndpoint() {
    std::lock_guard<std::mutex> lock(m_core->Mutex());
    boost::system::error_code error;
    return m_socket.local_endpoint(error);
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(m_core->Mutex());
      if (m_closed) return;
      m_closed = true;
      m_core->ShutdownLocked();  // destroys every timer
      boost::system::error_code ignored;
      m_socket.close(ignored);  // the pending receive completes with operation_aborted
    }
    // No timer callback runs after this (one already running finds the core shut down).
    m_timers->BeginShutdown();
    m_timers->WaitForShutdownToComplete(std::chrono::minutes(1));
  }

  // IEndpointIo ------------------------------------------------------------------------------

  void SendDatagram(const Udp::endpoint& to, const std::uint8_t* data, std::size_t size) override {
    if (m_closed) return;
    if (m_queuedHead == m_queuedCount) {
      boost::system::error_code error;
      m_socket.send_to(boost::asio::buffer(data, size), to, 0, error);
      if (!error) return;
      if (error != boost::asio::error::would_block && error != boost::asio::error::try_again) {
        ++m_core->ContextLocked().stats.sendErrors;  // e.g. no route: like a loss on the path
        return;
      }
    }
    // The socket buffer is full: keep the datagram (in order) until the socket can take it.
    auto& stats = m_core->ContextLocked().stats;
    ++stats.sendWouldBlock;
    if (m_queuedCount - m_queuedHead >= kMaxQueuedDatagrams) {
      ++stats.sendErrors;
      return;
    }
    if (m_queuedCount == m_queued.size() && m_queuedHead > 0) {
      // Reuse the slots already sent: move the waiting ones to the front. The one being sent
      // keeps its byte buffer (vectors are swapped, not copied), so its send is unaffected.
      std::rotate(m_queued.begin(), m_queued.begin() + static_cast<std::ptrdiff_t>(m_queuedHead),
                  m_queued.end());
      m_queuedCount -= m_queuedHead;
      m_queuedHead = 0;
    }
    if (m_queuedCount == m_queued.size()) m_queued.emplace_back();
    QueuedDatagram& queued = m_queued[m_queuedCount++];
    queued.to = to;
    queued.bytes.assign(data, data + size);  // capacity is reused after the first time
    if (!m_sending) SendQueuedLocked();
  }

  detail::Microseconds Now() const override { return TransportClock::Now(); }

  void Post(detail::UniqueFunction<void(boost::system::error_code)> handler,
            boost::system::error_code error) override {
    boost::asio::post(m_ioContext,
                      [handler = std::move(handler), error]() mutable { handler(error); });
  }

 private:
  struct QueuedDatagram {
    Udp::endpoint to;
    std::vector<std::uint8_t> bytes;
  };

  void StartReceiveLocked() {
    m_socket.async_receive_from(
        boost::asio::buffer(m_receiveBuffer), m_sender,
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t size) {
          self->OnReceive(error, size);
        });
  }

  void OnReceive(const boost::system::error_code& error, std::size_t size) {
    std::lock_guard<std::mutex> lock(m_core->Mutex());
    if (m_closed || error == boost::asio::error::operation_aborted) return;
    auto& stats = m_core->ContextLocked().stats;
    if (!error) {
      m_core->OnDatagramLocked(m_sender, m_receiveBuffer.data(), size);
    } else {  // benign or unexpected: stopping would strand every connection
      ++stats.receiveErrorsIgnored;
    }
    // Drain what else is already there without another trip through the reactor or IOCP.
    for (int i = 1; i < kReceiveBatch && !m_closed; ++i) {
      boost::system::error_code drainError;
      const std::size_t drained =
          m_socket.receive_from(boost::asio::buffer(m_receiveBuffer), m_sender, 0, drainError);
      if (drainError == boost::asio::error::would_block ||
          drainError == boost::asio::error::try_again) {
        break;
      }
      if (drainError) {
        ++stats.receiveErrorsIgnored;
        if (!IsBenignReceiveError(drainError)) break;
        continue;
      }
      m_core->OnDatagramLocked(m_sender, m_receiveBuffer.data(), drained);
    }
    if (!m_closed) StartReceiveLocked();
  }

  void SendQueuedLocked() {
    if (m_queuedHead == m_queuedCount) {
      m_queuedHead = m_queuedCount = 0;
      m_sending = false;
      return;
    }
    m_sending = true;
    QueuedDatagram& next = m_queued[m_queuedHead];
    m_socket.async_send_to(
        boost::asio::buffer(next.bytes), next.to,
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
          std::lock_guard<std::mutex> lock(self->m_core->Mutex());
          if (self->m_closed) return;
          if (error) ++self->m_core->ContextLocked().stats.sendErrors;
          ++self->m_queuedHead;
          self->SendQueuedLocked();
        });
  }

  boost::asio::io_context& m_ioContext;
  Udp::socket m_socket;
  TransportClock m_clock;
  std::unique_ptr<IManageTimerQueue> m_queue;
  std::unique_ptr<AsioTimerQueue> m_timers;
  Milliseconds m_granularity = 1;
  std::optional<detail::EndpointCore> m_core;
  bool m_closed = false;
  std::array<std::uint8_t, 65536> m_receiveBuffer{};
  Udp::endpoint m_sender;
  std::vector<QueuedDatagram> m_queued;  // [m_queuedHead, m_queuedCount) wait to be sent
  std::size_t m_queuedHead = 0;
  std::size_t m_queuedCount = 0;
  bool m_sending = false;
};

Endpoint::Endpoint(boost::asio::io_context& ioContext, const Udp::endpoint& local,
                   EndpointOptions options)
    : m_state(std::make_shared<State>(ioContext, local, ValidateOptions(options))) {
  m_state->Start();
}

Endpoint::~Endpoint() { Close(); }

Udp::endpoint Endpoint::LocalEndpoint() const { return m_state->LocalEndpoint(); }

namespace {

// Wraps a user's handler so that it receives a public Connection.
detail::EndpointCore::ConnectCompletion Wrap(std::shared_ptr<detail::EndpointCore> core,
                                             Endpoint::ConnectHandler handler) {
  return
      [core = std::move(core), handler = std::move(handler)](
          boost::system::error_code error, std::shared_ptr<detail::ConnectionState> state) mutable {
        std::shared_ptr<Connection> connection;
        if (state) connection = std::make_shared<Connection>(core, std::move(state));
        handler(error, std::move(connection));
      };
}

}  // namespace

void Endpoint::AsyncConnect(const Udp::endpoint& remote, ConnectHandler handler) {
  auto& core = m_state->Core();
  std::lock_guard<std::mutex> lock(core.Mutex());
  core.ConnectLocked(remote, Wrap(m_state->SharedCore(), std::move(handler)));
}

void Endpoint::AsyncAccept(ConnectHandler handler) {
  auto& core = m_state->Core();
  std::lock_guard<std::mutex> lock(core.Mutex());
  core.AcceptLocked(Wrap(m_state->SharedCore(), std::move(handler)));
}

void Endpoint::Close() { m_state->Close(); }

EndpointStatistics Endpoint::GetStatistics() const {
  auto& core = m_state->Core();
  std::lock_guard<std::mutex> lock(core.Mutex());
  return core.StatisticsLocked();
}

}  // namespace timerwheel::rudp
