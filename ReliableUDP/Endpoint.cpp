// Endpoint: the Boost.Asio socket, clock and timer driver around the sans-I/O EndpointCore.
//
// Ground rules (locking): the engine's mutex (LockedEngine) guards the engine, every connection,
// and every operation on the socket (receive initiation, the non-blocking receive drain, sends,
// close) and the batches, so the socket is never used from two threads at once. The timer driver
// dispatches without its own lock; its callbacks take the engine's mutex (lock order: engine, then
// driver). Every call into the engine ends with Flush under that mutex (LockedEngine::Call).
//
// The socket path, two ways:
// - batched (options.batchedIo on Linux): the socket waits for readability (async_wait) and each
//   wake-up reads with recvmmsg, several datagrams per call (UDP_GRO: several per buffer); the
//   datagrams one engine call produces are held in a SendBatch and leave together at its end
//   with sendmmsg (UDP_SEGMENT: runs to one peer as one message). No added latency: nothing waits
//   for more traffic, only for the end of the call that produced it.
// - one datagram per system call (Windows, where Asio uses IOCP, and batchedIo off): an
//   overlapped receive and a non-blocking drain; sends go out as the engine makes them.
// Either way a send the socket cannot take now waits, in order, for it to become writable.
//
// Allocation: every Asio operation the endpoint starts (the socket's waits and receives, the
// posted completions and flushes) takes its memory from the endpoint's HandlerMemory, recycled
// blocks behind a mutex of their own (taken by Asio after the engine's, or alone), so a warm
// endpoint allocates nothing per datagram or per completion.
#include "ReliableUDP/Endpoint.h"

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "ReliableUDP/EngineConversions.h"
#include "ReliableUDP/LockedEngine.h"
#include "TimerQueue/AsioTimerQueue.h"
#include "TimerQueue/Detail/HandlerMemory.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"
#include "UdpSocket/DatagramBatch.h"
#include "UdpSocket/UdpSocketSetup.h"

namespace timerwheel::rudp {
namespace {

using Udp = boost::asio::ip::udp;
using timerwheel::detail::HandlerMemory;
using timerwheel::detail::WithMemory;

// Datagrams waiting for the socket when a send would block; beyond this they are dropped and
// counted (loss recovery resends what they carried).
constexpr std::size_t kMaxQueuedDatagrams = 4096;
// Datagrams read per wake-up before the receive is re-armed: amortises the completion.
constexpr int kReceiveBatch = 64;
// The batched path: messages per recvmmsg (64 KiB each, so a GRO batch fits: 1 MiB in all) and
// the datagrams held for one sendmmsg (at least 64, and about 512 KiB at large datagram sizes).
constexpr std::size_t kReceiveMessages = 16;
std::size_t SendBatchCapacity(std::size_t maxDatagramSize) {
  return std::max<std::size_t>(64, std::min<std::size_t>(512, (512 << 10) / maxDatagramSize));
}

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

class Endpoint::Impl final : public detail::IEndpointIo, public std::enable_shared_from_this<Impl> {
 public:
  Impl(boost::asio::io_context& ioContext, const Udp::endpoint& local,
       const EndpointOptions& options)
      : m_ioContext(ioContext),
        m_socket(ioContext),
        m_batched(options.batchedIo && udp::BatchedSystemCallsAvailable()) {
    m_socket.open(local.protocol());
    m_socket.bind(local);
    m_socket.non_blocking(true);
    boost::system::error_code ignored;  // the OS may cap these; it is not an error
    m_socket.set_option(Udp::socket::receive_buffer_size(options.socketReceiveBufferSize), ignored);
    m_socket.set_option(Udp::socket::send_buffer_size(options.socketSendBufferSize), ignored);
    // If it fails the socket still works: the receive errors ICMP reports cause are counted and
    // the receive re-armed (OnReceive). Said once, as the library's default error handler does.
    if (const auto icmp = udp::DisableIcmpErrorReports(m_socket); icmp.error) {
      std::fprintf(stderr, "ReliableUDP: turning off %s failed: %s\n", icmp.what,
                   icmp.error.message().c_str());
    }
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
    driver.dispatchPolicy = DispatchPolicy::WithoutLock;  // callbacks take the engine's lock
    driver.monitor = options.timerMonitor;
    m_timers = std::make_unique<AsioTimerQueue>(ioContext, *m_queue, driver);
    m_engine.emplace(*this, *m_timers, m_granularity, options);
    if (m_batched) {
      m_sendBatch.emplace(SendBatchCapacity(options.maxDatagramSize), options.maxDatagramSize,
                          options.segmentationOffload);
      m_receiveBatch.emplace(kReceiveMessages);
      if (options.receiveOffload) m_receiveBatch->EnableReceiveOffload(m_socket);
    }
  }

  ~Impl() { Close(); }

  void Start() {
    std::lock_guard<std::mutex> lock(m_engine->Mutex());
    StartReceiveLocked();
  }

  // The socket path's counters, added to the engine's.
  void AddSocketCounters(EndpointStatistics& stats) const {
    udp::BatchCounters counters = m_unbatchedCounters;
    for (const udp::BatchCounters* batch :
         {m_sendBatch ? &m_sendBatch->Counters() : nullptr,
          m_receiveBatch ? &m_receiveBatch->Counters() : nullptr}) {
      if (batch == nullptr) continue;
      counters.sendCalls += batch->sendCalls;
      counters.receiveCalls += batch->receiveCalls;
      counters.segmentedMessages += batch->segmentedMessages;
      counters.coalescedMessages += batch->coalescedMessages;
      counters.offloadRefusals += batch->offloadRefusals;
    }
    stats.sendSystemCalls = counters.sendCalls;
    stats.receiveSystemCalls = counters.receiveCalls;
    stats.segmentedSends = counters.segmentedMessages;
    stats.coalescedReceives = counters.coalescedMessages;
    stats.offloadRefusals = counters.offloadRefusals;
  }

  detail::LockedEngine& Engine() { return *m_engine; }

  std::shared_ptr<detail::LockedEngine> SharedEngine() {
    return std::shared_ptr<detail::LockedEngine>(shared_from_this(), &*m_engine);
  }

  Udp::endpoint LocalEndpoint() {
    std::lock_guard<std::mutex> lock(m_engine->Mutex());
    boost::system::error_code error;
    return m_socket.local_endpoint(error);
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(m_engine->Mutex());
      if (m_closed) return;
      m_closed = true;
      m_engine->Core().Shutdown();  // destroys every timer
      FlushLocked();                // what Shutdown sent (closes) leaves before the socket goes
      boost::system::error_code ignored;
      m_socket.close(ignored);  // the pending receive completes with operation_aborted
      m_receiveBackoff.Cancel();
    }
    // No timer callback runs after this (one already running finds the core shut down).
    m_timers->BeginShutdown();
    m_timers->WaitForShutdownToComplete(std::chrono::minutes(1));
  }

  // IEndpointIo ------------------------------------------------------------------------------

  void SendDatagram(const detail::Address& address, const std::uint8_t* data,
                    std::size_t size) override {
    if (m_closed) return;
    const Udp::endpoint to = detail::ToUdpEndpoint(address);
    if (m_sendBatch) {
      if (m_sendBatch->Full()) FlushLocked();
      if (m_sendBatch->Full()) {  // the socket is full and so is the batch: like a loss
        ++m_engine->Core().Context().stats.sendErrors;
        return;
      }
      m_sendBatch->Add(to, data, size);
      return;
    }
    if (m_queuedHead == m_queuedCount) {
      boost::system::error_code error;
      ++m_unbatchedCounters.sendCalls;
      m_socket.send_to(boost::asio::buffer(data, size), to, 0, error);
      if (!error) return;
      if (error != boost::asio::error::would_block && error != boost::asio::error::try_again) {
        ++m_engine->Core().Context().stats.sendErrors;  // e.g. no route: like a loss on the path
        return;
      }
    }
    // The socket buffer is full: keep the datagram (in order) until the socket can take it.
    auto& stats = m_engine->Core().Context().stats;
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

  void Flush(BatchEnd end) override {
    if (m_closed || !m_sendBatch || m_sendBatch->Empty()) return;
    if (end == BatchEnd::Call) return FlushLocked();
    // A timer expiry: the timer driver runs every due expiry in one handler, so a flush queued
    // behind it sends what all of them produced together (e.g. the delayed ACKs of many
    // connections) without delaying any past the end of that dispatch.
    if (m_flushQueued) return;
    m_flushQueued = true;
    boost::asio::post(m_ioContext, WithMemory(m_handlerMemory, [self = shared_from_this()] {
                        std::lock_guard<std::mutex> lock(self->m_engine->Mutex());
                        self->m_flushQueued = false;
                        if (!self->m_closed) self->FlushLocked();
                      }));
  }

  detail::Microseconds Now() const override { return TransportClock::Now(); }

  void Post(detail::Completion handler, detail::EngineError error) override {
    // The posted operation lives in m_handlerMemory, so it holds the endpoint. Not while the
    // endpoint is being destroyed (a failed construction): then from the heap, holding nothing.
    if (std::shared_ptr<Impl> self = weak_from_this().lock()) {
      boost::asio::post(m_ioContext,
                        WithMemory(m_handlerMemory,
                                   [self = std::move(self), error,
                                    handler = std::move(handler)]() mutable { handler(error); }));
      return;
    }
    boost::asio::post(m_ioContext,
                      [handler = std::move(handler), error]() mutable { handler(error); });
  }

 private:
  struct QueuedDatagram {
    Udp::endpoint to;
    std::vector<std::uint8_t> bytes;
  };

  void StartReceiveLocked() {
    if (m_receiveBatch) {
      m_socket.async_wait(Udp::socket::wait_read,
                          WithMemory(m_handlerMemory, [self = shared_from_this()](
                                                          const boost::system::error_code& error) {
                            self->OnReadable(error);
                          }));
      return;
    }
    m_socket.async_receive_from(
        boost::asio::buffer(m_receiveBuffer), m_sender,
        WithMemory(m_handlerMemory, [self = shared_from_this()](
                                        const boost::system::error_code& error, std::size_t size) {
          self->OnReceive(error, size);
        }));
  }

  // The batched path: the socket has something to read (or failed).
  void OnReadable(const boost::system::error_code& waitError) {
    detail::LockedEngine::Call call(*m_engine);
    if (m_closed || waitError == boost::asio::error::operation_aborted) return;
    auto& core = m_engine->Core();
    auto& stats = core.Context().stats;
    int datagrams = 0;
    bool failing = static_cast<bool>(waitError);
    bool drained = false;
    while (!failing && datagrams < kReceiveBatch && !m_closed) {
      boost::system::error_code error;
      if (m_receiveBatch->Receive(m_socket, error) == 0) {
        if (error == boost::asio::error::would_block || error == boost::asio::error::try_again) {
          drained = true;
          break;
        }
        ++stats.receiveErrorsIgnored;
        failing = !IsBenignReceiveError(error);
        continue;
      }
      m_receiveBackoff.OnReceived();
      m_receiveBatch->ForEachDatagram(
          [&](const Udp::endpoint& from, const std::uint8_t* data, std::size_t size) {
            ++datagrams;
            if (!m_closed) core.OnDatagram(detail::ToAddress(from), data, size);
          });
    }
    if (m_closed) return;
    if (failing) {
      // As on the other path: count it and wait again, with a growing delay while it persists.
      if (waitError) ++stats.receiveErrorsIgnored;
      m_receiveBackoff.OnError([self = shared_from_this()] {
        std::lock_guard<std::mutex> lock(self->m_engine->Mutex());
        if (!self->m_closed) self->StartReceiveLocked();
      });
      return;
    }
    if (drained) return StartReceiveLocked();
    // More is waiting. Asio's epoll reactor is edge-triggered and does not read ahead for a wait,
    // so a new async_wait would sleep until the next datagram arrives: continue through the
    // io_context's queue instead, after whatever else is ready (fair to timers and other sockets).
    boost::asio::post(m_ioContext, WithMemory(m_handlerMemory, [self = shared_from_this()] {
                        self->OnReadable(boost::system::error_code());
                      }));
  }

  // Hands the held datagrams to the socket; what it cannot take now waits for it to be writable.
  void FlushLocked() {
    if (!m_sendBatch || m_sendBatch->Empty() || m_waitingWritable) return;
    const udp::SendBatch::FlushResult result = m_sendBatch->Flush(m_socket);
    auto& stats = m_engine->Core().Context().stats;
    stats.sendErrors += result.failed;
    if (!result.wouldBlock) return;
    ++stats.sendWouldBlock;
    m_waitingWritable = true;
    m_socket.async_wait(
        Udp::socket::wait_write,
        WithMemory(m_handlerMemory, [self = shared_from_this()](const boost::system::error_code&) {
          std::lock_guard<std::mutex> lock(self->m_engine->Mutex());
          self->m_waitingWritable = false;
          if (!self->m_closed) self->FlushLocked();
        }));
  }

  void OnReceive(const boost::system::error_code& error, std::size_t size) {
    detail::LockedEngine::Call call(*m_engine);
    if (m_closed || error == boost::asio::error::operation_aborted) return;
    auto& core = m_engine->Core();
    auto& stats = core.Context().stats;
    if (!error) {
      ++m_unbatchedCounters.receiveCalls;
      m_receiveBackoff.OnReceived();
      core.OnDatagram(detail::ToAddress(m_sender), m_receiveBuffer.data(), size);
    } else {
      // Benign (an ICMP report) or not, stopping would strand every connection: count it and
      // re-arm, at once while errors are isolated, with a growing delay while they persist.
      ++stats.receiveErrorsIgnored;
      m_receiveBackoff.OnError([self = shared_from_this()] {
        std::lock_guard<std::mutex> lock(self->m_engine->Mutex());
        if (!self->m_closed) self->StartReceiveLocked();
      });
      return;
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
      ++m_unbatchedCounters.receiveCalls;
      core.OnDatagram(detail::ToAddress(m_sender), m_receiveBuffer.data(), drained);
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
    ++m_unbatchedCounters.sendCalls;
    QueuedDatagram& next = m_queued[m_queuedHead];
    m_socket.async_send_to(
        boost::asio::buffer(next.bytes), next.to,
        WithMemory(m_handlerMemory, [self = shared_from_this()](
                                        const boost::system::error_code& error, std::size_t) {
          std::lock_guard<std::mutex> lock(self->m_engine->Mutex());
          if (self->m_closed) return;
          if (error) ++self->m_engine->Core().Context().stats.sendErrors;
          ++self->m_queuedHead;
          self->SendQueuedLocked();
        }));
  }

  // First, so last to go: the operations of every handler below live here.
  HandlerMemory m_handlerMemory;
  boost::asio::io_context& m_ioContext;
  Udp::socket m_socket;
  const bool m_batched;
  std::optional<udp::SendBatch> m_sendBatch;        // batched path only
  std::optional<udp::ReceiveBatch> m_receiveBatch;  // batched path only
  bool m_waitingWritable = false;                   // a wait_write is pending; it flushes the batch
  bool m_flushQueued = false;                       // a flush is posted behind the timer dispatch
  udp::BatchCounters m_unbatchedCounters;
  udp::ReceiveErrorBackoff m_receiveBackoff{m_socket.get_executor()};  // after m_socket
  TransportClock m_clock;
  std::unique_ptr<IManageTimerQueue> m_queue;
  std::unique_ptr<AsioTimerQueue> m_timers;
  Milliseconds m_granularity = 1;
  std::optional<detail::LockedEngine> m_engine;
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
    : m_impl(std::make_shared<Impl>(ioContext, local, ValidateOptions(std::move(options)))) {
  m_impl->Start();
}

Endpoint::~Endpoint() { Close(); }

Udp::endpoint Endpoint::LocalEndpoint() const { return m_impl->LocalEndpoint(); }

namespace {

// Wraps a user's handler so that it receives a public Connection.
detail::EndpointCore::ConnectCompletion Wrap(std::shared_ptr<detail::LockedEngine> engine,
                                             Endpoint::ConnectHandler handler) {
  return [engine = std::move(engine), handler = std::move(handler)](
             detail::EngineError error, std::shared_ptr<detail::ConnectionCore> state) mutable {
    std::shared_ptr<Connection> connection;
    if (state) connection = std::make_shared<Connection>(engine, std::move(state));
    handler(detail::ToErrorCode(error), std::move(connection));
  };
}

}  // namespace

void Endpoint::AsyncConnect(const Udp::endpoint& remote, ConnectHandler handler) {
  auto& engine = m_impl->Engine();
  detail::LockedEngine::Call call(engine);
  engine.Core().Connect(detail::ToAddress(remote),
                        Wrap(m_impl->SharedEngine(), std::move(handler)));
}

void Endpoint::AsyncAccept(ConnectHandler handler) {
  auto& engine = m_impl->Engine();
  detail::LockedEngine::Call call(engine);
  engine.Core().Accept(Wrap(m_impl->SharedEngine(), std::move(handler)));
}

void Endpoint::Close() { m_impl->Close(); }

EndpointStatistics Endpoint::GetStatistics() const {
  auto& engine = m_impl->Engine();
  std::lock_guard<std::mutex> lock(engine.Mutex());
  EndpointStatistics statistics = engine.Core().Statistics();
  m_impl->AddSocketCounters(statistics);
  return statistics;
}

}  // namespace timerwheel::rudp
