// Endpoint: the Boost.Asio socket, clock and timer drivers around the sans-I/O EndpointCores.
//
// Shards (options.shards, issue 18): the endpoint's connections are split over N shards, each a
// LockedEngine (an EndpointCore behind its own mutex) with its own timer queue and driver and its
// own send path. Every connection lives in one shard; a datagram finds its shard from its
// destination connection ID (Detail/Sharding.h), so datagrams of connections in different shards
// are handled in parallel by the io_context's threads. N receives are outstanding on the socket
// (on Windows: N overlapped receives, completed by whichever IOCP thread is free).
//
// Ground rules (locking):
// - A shard's mutex (LockedEngine) guards its engine, every connection of it, its send batch and
//   queue and its counters. Every call into an engine holds it, through LockedEngine::Call, which
//   flushes the shard's sends before unlocking.
// - m_socketMutex guards the Asio operations started on the socket (waits, receives, queued sends),
//   the receive system calls and the receivers' state, the socket's closing, and m_closed's
//   change. A shard's sends (sendmmsg, or send_to) run under the shard's mutex only: the kernel
//   serialises them, and Asio's synchronous operations only read the socket object, which only
//   Close changes, holding every shard's mutex and m_socketMutex.
// - m_acceptMutex guards the accept waiters shared by the shards and, once the endpoint is
//   closed, whether the run that fails them is scheduled.
// - A shard's m_completionMutex guards its queue of completions (Shard::Post): taken inside the
//   shard's mutex (and m_acceptMutex, when a shared accept waiter is served) by the engine's
//   Post, or alone by the operation that runs them; nothing is taken inside it but
//   m_handlerMemory's and Asio's own locks.
// - Lock order: shard mutexes in index order, then m_socketMutex or m_acceptMutex, then a shard's
//   m_completionMutex, then the timer drivers' own locks (the engine arms timers inside its calls:
//   the drivers dispatch without their lock). A receiver takes m_socketMutex for a system call and
//   releases it before it takes a shard's mutex to hand the datagrams over.
// - User handlers never run under any of these (the engine posts them: a shard's completions run
//   in the order they were made, by one operation at a time), and are never destroyed under them
//   (a handler may hold the last reference to a Connection, whose destructor takes its shard's
//   mutex): the run destroys each outside its queue's lock, and a call that fails before the
//   engine has taken its handler (Connect, Accept; Connection's AsyncSend, AsyncReceive and
//   AsyncWaitClosed) destroys it after it has released them.
//
// The socket path, two ways:
// - batched (options.batchedIo on Linux): each receiver waits for readability (a
//   udp::ReadableWait where the build has it, which spares the reactor's epoll_ctl per wait;
//   else async_wait) and reads with recvmmsg, several datagrams per call (UDP_GRO: several per
//   buffer); the datagrams one engine call produces are held in its shard's SendBatch and leave
//   together at its end with sendmmsg (UDP_SEGMENT: runs to one peer as one message). No added
//   latency: nothing waits for more traffic, only for the end of the call that produced it.
// - one datagram per system call (Windows, where Asio uses IOCP, and batchedIo off): overlapped
//   receives and a non-blocking drain; sends go out as the engine makes them.
// Either way a send the socket cannot take now waits, in order, for it to become writable.
//
// Allocation: every Asio operation the endpoint starts (the socket's waits and receives, the
// posted completions and flushes) takes its memory from the endpoint's HandlerMemory, recycled
// blocks behind a mutex of their own (taken by Asio after the others, or alone), so a warm
// endpoint allocates nothing per datagram or per completion. The blocks for as many operations
// as can be outstanding at once are made when the endpoint opens, so no operation fails for
// memory: the flushes that end every engine call run in a destructor (LockedEngine::Call).
#include "ReliableUDP/Endpoint.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/post.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/RoomForOne.h"
#include "ReliableUDP/Detail/Sharding.h"
#include "ReliableUDP/EngineConversions.h"
#include "ReliableUDP/LockedEngine.h"
#include "ReliableUDP/SharedAdmission.h"
#include "TimerQueue/AsioTimerQueue.h"
#include "TimerQueue/Detail/DeferOrPost.h"
#include "TimerQueue/Detail/HandlerMemory.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"
#include "UdpSocket/DatagramBatch.h"
#include "UdpSocket/ReadableWait.h"
#include "UdpSocket/UdpSocketSetup.h"

namespace timerwheel::rudp {
namespace {

using Udp = boost::asio::ip::udp;
using timerwheel::detail::DeferOrPost;
using timerwheel::detail::HandlerMemory;
using timerwheel::detail::WithMemory;

// Datagrams waiting for the socket when a send would block (per shard); beyond this they are
// dropped and counted (loss recovery resends what they carried).
constexpr std::size_t kMaxQueuedDatagrams = 4096;
// Datagrams read per wake-up before the receive is re-armed: amortises the completion.
constexpr int kReceiveBatch = 64;
// The batched path: messages per recvmmsg (64 KiB each, so a GRO batch fits: 1 MiB in all) and
// the datagrams held for one sendmmsg (at least 64, and about 512 KiB at large datagram sizes).
constexpr std::size_t kReceiveMessages = 16;
// A shard's turn reads the clock once for this many of its datagrams (see HandOverFrom).
constexpr std::size_t kDatagramsPerClockRead = 16;
// The most shards an endpoint has (ValidateOptions).
constexpr std::size_t kMaxShards = 64;
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

bool WouldBlock(const boost::system::error_code& error) {
  return error == boost::asio::error::would_block || error == boost::asio::error::try_again;
}

// Every field of EndpointStatistics is a count, a byte total or a table size: the endpoint's are
// its shards' summed.
constexpr std::size_t kStatisticsFields = sizeof(EndpointStatistics) / sizeof(std::uint64_t);
static_assert(std::is_trivially_copyable_v<EndpointStatistics> &&
                  sizeof(EndpointStatistics) == kStatisticsFields * sizeof(std::uint64_t),
              "EndpointStatistics must hold only std::uint64_t fields, which Add sums");
void Add(EndpointStatistics& total, const EndpointStatistics& part) {
  std::array<std::uint64_t, kStatisticsFields> sum{}, add{};
  std::memcpy(sum.data(), &total, sizeof total);
  std::memcpy(add.data(), &part, sizeof part);
  for (std::size_t i = 0; i < kStatisticsFields; ++i) sum[i] += add[i];
  std::memcpy(static_cast<void*>(&total), sum.data(), sizeof total);  // trivially copyable
}

void AddCounters(udp::BatchCounters& total, const udp::BatchCounters& part) {
  total.sendCalls += part.sendCalls;
  total.receiveCalls += part.receiveCalls;
  total.segmentedMessages += part.segmentedMessages;
  total.coalescedMessages += part.coalescedMessages;
  total.offloadRefusals += part.offloadRefusals;
  total.truncatedDatagrams += part.truncatedDatagrams;
}

}  // namespace

class Endpoint::Impl final : public std::enable_shared_from_this<Impl>,
                             private detail::SharedAcceptWaiters {
 public:
  using ConnectCompletion = detail::EndpointCore::ConnectCompletion;

  Impl(boost::asio::io_context& ioContext, const Udp::endpoint& local,
       const EndpointOptions& options)
      : m_ioContext(ioContext),
        m_socket(ioContext),
        m_batched(options.batchedIo && udp::BatchedSystemCallsAvailable()),
        m_steering(options.shards) {
    m_socket.open(local.protocol());
    m_socket.bind(local);
    m_socket.non_blocking(true);
    m_bufferSizes = udp::SetSocketBufferSizes(m_socket, options.socketReceiveBufferSize,
                                              options.socketSendBufferSize);
    // If it fails the socket still works: the receive errors ICMP reports cause are counted and
    // the receive re-armed (OnReceive). Said once, as the library's default error handler does.
    if (const auto icmp = udp::DisableIcmpErrorReports(m_socket); icmp.error) {
      std::fprintf(stderr, "ReliableUDP: turning off %s failed: %s\n", icmp.what,
                   icmp.error.message().c_str());
    }
    const EndpointOptions shardOptions = detail::OptionsOfShard(options);
    m_admission.emplace(options);
    for (std::size_t i = 0; i < options.shards; ++i) {
      m_shards.push_back(std::make_unique<Shard>(*this, static_cast<std::uint32_t>(i),
                                                 static_cast<std::uint32_t>(options.shards),
                                                 shardOptions));
    }
    // One receiver with one shard: as before sharding, one read and hand-over at a time. With
    // more, one per shard: while one reads, the others hand over to their shards in parallel.
    // UDP_GRO is the socket's: asked for once (one refusal counts once), and every receiver reads
    // as the kernel's answer says.
    for (std::size_t i = 0; i < options.shards; ++i) {
      auto receiver = std::make_unique<Receiver>();
      if (m_batched) {
        receiver->batch.emplace(kReceiveMessages);
        if (udp::ReadableWait::kWithoutRearm) receiver->readableWait.emplace(m_socket);
        if (options.receiveOffload && i == 0) receiver->batch->EnableReceiveOffload(m_socket);
        if (options.receiveOffload && i != 0) {
          receiver->batch->ShareReceiveOffload(*m_receivers.front()->batch);
        }
      } else {
        receiver->bytes = std::make_unique<std::uint8_t[]>(kReceiveMessages * Receiver::kSlotSize);
      }
      receiver->owner = this;
      m_receivers.push_back(std::move(receiver));
    }
    // Memory for every operation the endpoint can have outstanding at once, so that none of them
    // fails for memory later: a shard's flush and its wait for writability are started from the
    // end of every engine call (LockedEngine::Call's destructor, which must not throw), and the
    // run of its completions from the close. One read or wait of the socket is outstanding at a
    // time (m_reading); each shard has at most one run of its completions, and on the batched
    // path one posted flush and one wait for writability, or on the other one send of its queue.
    // Once closed, one run fails the accept waiters (m_closedWaitersScheduled). (Asio frees an
    // operation's memory before its handler runs, so the next of a kind reuses the block.)
    constexpr std::size_t kOperationsPerShard = 3;
    m_handlerMemory.Reserve(1 + kOperationsPerShard * m_shards.size() + 1);
  }

  ~Impl() { Close(); }

  void Start() {
    std::lock_guard<std::mutex> lock(m_socketMutex);
    ArmLocked();
  }

  Udp::endpoint LocalEndpoint() {
    std::lock_guard<std::mutex> lock(m_socketMutex);
    boost::system::error_code error;
    return m_socket.local_endpoint(error);
  }

  // Each step can run again, and each call runs those not done: a Close that threw (a shard's
  // Shutdown could not post a completion: std::bad_alloc) is finished by the next, which the
  // destructor makes at the latest. Once the shards are shut down nothing here allocates.
  void Close() {
    {
      // Every shard's lock, in index order; held in an array, so that taking them cannot fail.
      std::array<std::unique_lock<std::mutex>, kMaxShards> shardLocks;
      for (std::size_t i = 0; i < m_shards.size(); ++i) {
        shardLocks[i] = std::unique_lock<std::mutex>(m_shards[i]->Engine().Mutex());
      }
      if (!m_closed) {
        for (auto& shard : m_shards) {
          // Destroys every timer. May throw, before m_closed is set: the next Close goes on
          // (a shard done already returns at once).
          shard->Engine().Core().Shutdown();
          // What Shutdown sent (closes) leaves before the socket goes (it may take
          // m_socketMutex).
          shard->FlushLocked();
        }
        std::lock_guard<std::mutex> lock(m_socketMutex);
        m_closed = true;
        m_receiveBufferDrops = udp::ReceiveBufferDrops(m_socket);  // the count goes with it
        boost::system::error_code ignored;
        m_socket.close(ignored);  // the pending receives complete with operation_aborted
        m_receiveBackoff.Cancel();
      }
    }
    {
      // The waiters stay where they are; one posted run fails them all, in order. It cannot
      // fail (its memory is reserved), so none is lost however the heap fares; and an accept
      // made after this joins them (Accept).
      std::lock_guard<std::mutex> lock(m_acceptMutex);
      m_acceptClosed = true;
      ScheduleClosedAcceptWaitersLocked();
    }
    // No timer callback runs after this (one already running finds its core shut down).
    for (auto& shard : m_shards) shard->ShutDownTimers();
  }

  // Connect and Accept wrap the handler before they take a lock, into a local declared before
  // it: what fails before the handler is queued (the wrapping's allocation, the engine's open, a
  // queue's growth, a post) leaves it there, and it is destroyed after the lock is released. Its
  // captures may hold the last reference to a Connection, whose destructor takes its shard's lock
  // (a std::mutex locked twice, or shard locks out of order, or one inside m_acceptMutex).
  void Connect(const Udp::endpoint& remote, ConnectHandler handler) {
    ConnectCompletion completion = Wrap(std::move(handler));
    Shard& shard = *m_shards[m_nextConnectShard.fetch_add(1) % m_shards.size()];
    detail::LockedEngine::Call call(shard.Engine());
    shard.Engine().Core().Connect(detail::ToAddress(remote), completion);
  }

  void Accept(ConnectHandler handler) {
    ConnectCompletion waiter = Wrap(std::move(handler));
    {
      std::lock_guard<std::mutex> lock(m_acceptMutex);
      // The deque's growth comes before the move: if it throws, `waiter` is still here.
      m_acceptWaiters.push_back(std::move(waiter));
      // Closed: the run that fails the waiters serves it too, after those before it.
      if (m_acceptClosed) return ScheduleClosedAcceptWaitersLocked();
    }
    // The waiter is published before the sweep: a connection established in a shard after the
    // sweep passed it finds the waiter there (HandOverAccepted asks ServeOldestWaiter).
    for (auto& shard : m_shards) {
      detail::LockedEngine::Call call(shard->Engine());
      auto& core = shard->Engine().Core();
      // A completion that cannot be posted (no memory) leaves its waiter first in the queue,
      // served at the next connection established, and its connection in the shard's queue,
      // taken by the next accept. Not thrown: the caller's handler is queued, so the call has
      // taken it.
      try {
        while (core.HasAcceptable()) {
          if (!ServeOldestWaiter([&](ConnectCompletion& waiter) { core.Accept(waiter); })) return;
        }
      } catch (const std::bad_alloc&) {
        return;
      }
    }
  }

  EndpointStatistics Statistics() {
    EndpointStatistics total;
    udp::BatchCounters counters;
    for (auto& shard : m_shards) {
      std::lock_guard<std::mutex> lock(shard->Engine().Mutex());
      Add(total, shard->Engine().Core().Statistics());
      total.lockWaitMicroseconds += shard->Engine().WaitMicroseconds();
      AddCounters(counters, shard->Counters());
    }
    {
      std::lock_guard<std::mutex> lock(m_socketMutex);
      for (auto& receiver : m_receivers) {
        AddCounters(counters, receiver->counters);
        if (receiver->batch) AddCounters(counters, receiver->batch->Counters());
      }
      total.receiveErrorsIgnored += m_receiveErrors;
      total.droppedSocketBufferFull =
          m_closed ? m_receiveBufferDrops : udp::ReceiveBufferDrops(m_socket);
    }
    total.socketReceiveBufferBytes = static_cast<std::uint64_t>(m_bufferSizes.receive);
    total.socketSendBufferBytes = static_cast<std::uint64_t>(m_bufferSizes.send);
    total.admissionAddresses = m_admission->TrackedAddresses();  // shared: not a sum
    total.sendSystemCalls = counters.sendCalls;
    total.receiveSystemCalls = counters.receiveCalls;
    total.segmentedSends = counters.segmentedMessages;
    total.coalescedReceives = counters.coalescedMessages;
    total.offloadRefusals = counters.offloadRefusals;
    total.droppedTruncated = counters.truncatedDatagrams;
    return total;
  }

 private:
  // One shard: an engine, its timers and its send path (the engine's IEndpointIo).
  class Shard final : public detail::IEndpointIo {
   public:
    Shard(Impl& owner, std::uint32_t index, std::uint32_t count, const EndpointOptions& options)
        : m_owner(owner) {
      // The wheel covers a connection's longest wait (twice the idle timeout, or the handshake
      // timeout; at least a minute) up to two minutes: 2^17 slots, 1 MiB a shard at 1 ms. A
      // longer wait is armed in parts (ConnectionCore::ArmTimer caps each arming at the queue's
      // maximum; an early expiry re-arms for the rest). Uncapped, a 70-minute idle timeout gave
      // each shard 128 MiB of slots, and 2 x idleTimeout overflowed 32 bits.
      const std::uint64_t longest = std::max<std::uint64_t>(
          {60'000, 2 * std::uint64_t{options.idleTimeout}, options.handshakeTimeout});
      const auto maximumTimeout =
          static_cast<Milliseconds>(std::min<std::uint64_t>(longest, 120'000));
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
      driver.dispatchPolicy = DispatchPolicy::WithoutLock;  // callbacks take the shard's lock
      driver.monitor = options.timerMonitor;
      m_timers = std::make_unique<AsioTimerQueue>(owner.m_ioContext, *m_queue, driver);
      detail::ShardRole role;
      role.index = index;
      role.count = count;
      role.acceptWaiters = &owner;
      role.admission = &*owner.m_admission;
      m_engine.emplace(*this, *m_timers, m_granularity, options, role);
      if (owner.m_batched) {
        m_sendBatch.emplace(SendBatchCapacity(options.maxDatagramSize), options.maxDatagramSize,
                            options.segmentationOffload);
      }
    }

    detail::LockedEngine& Engine() { return *m_engine; }

    // Turns (Impl::TakeTicketsLocked): handed out under the owner's m_socketMutex in the order
    // the socket was read, served in that order under this shard's mutex. Every ticket taken is
    // served, after Close too (then without work), or the reads after it would wait for ever.
    std::uint64_t TakeTicket() { return m_ticketsIssued++; }
    template <class Work>
    void InTurn(std::uint64_t ticket, Work&& work) {
      std::unique_lock<std::mutex> lock = m_engine->Lock();
      if (m_serving != ticket) {  // an earlier read's datagrams for this shard come first
        const auto start = std::chrono::steady_clock::now();
        m_turn.wait(lock, [&] { return m_serving == ticket; });
        m_engine->AddWait(start);
      }
      // The turn passes on even if `work` throws: one left unserved would make every later
      // read's hand-over to this shard wait for ever.
      struct PassTurn {
        PassTurn(Shard& turnOf, std::unique_lock<std::mutex>& held) : shard(turnOf), lock(held) {}
        PassTurn(const PassTurn&) = delete;
        PassTurn& operator=(const PassTurn&) = delete;
        ~PassTurn() {
          ++shard.m_serving;
          lock.unlock();
          shard.m_turn.notify_all();
        }
        Shard& shard;
        std::unique_lock<std::mutex>& lock;
      } passTurn{*this, lock};
      if (!m_owner.m_closed) {
        work(m_engine->Core());
        Flush(BatchEnd::Call);  // as LockedEngine::Call does
      }
    }

    const udp::BatchCounters& Counters() const {  // with the shard's lock held
      if (m_sendBatch) return m_sendBatch->Counters();
      return m_counters;
    }

    void ShutDownTimers() {
      m_timers->BeginShutdown();
      m_timers->WaitForShutdownToComplete(std::chrono::minutes(1));
    }

    // Hands the held datagrams to the socket; what it cannot take now waits for it to be
    // writable. With the shard's lock held.
    // Does not throw: it ends every engine call (LockedEngine::Call's destructor). The wait's
    // memory is reserved (Impl's constructor).
    void FlushLocked() noexcept {
      if (!m_sendBatch || m_sendBatch->Empty() || m_waitingWritable || m_owner.m_closed) return;
      const udp::SendBatch::FlushResult result = m_sendBatch->Flush(m_owner.m_socket);
      auto& stats = m_engine->Core().Context().stats;
      stats.sendErrors += result.failed;
      if (!result.wouldBlock) return;
      ++stats.sendWouldBlock;
      std::lock_guard<std::mutex> lock(m_owner.m_socketMutex);
      // While the endpoint is destroyed (a failed construction) nothing holds it, and nothing
      // waits: what is held is dropped with the socket.
      std::shared_ptr<Impl> self = m_owner.weak_from_this().lock();
      if (m_owner.m_closed || !self) return;
      // Marked waiting once the wait is started; its handler takes the shard's lock, held here,
      // so it cannot run before the mark.
      m_owner.m_socket.async_wait(
          Udp::socket::wait_write,
          WithMemory(m_owner.m_handlerMemory,
                     [self = std::move(self), this](const boost::system::error_code&) {
                       const auto shardLock = m_engine->Lock();
                       m_waitingWritable = false;
                       FlushLocked();
                     }));
      m_waitingWritable = true;
    }

    // IEndpointIo ----------------------------------------------------------------------------

    void SendDatagram(const detail::Address& address, const std::uint8_t* data,
                      std::size_t size) override {
      if (m_owner.m_closed) return;
      const Udp::endpoint to = detail::ToUdpEndpoint(address);
      auto& stats = m_engine->Core().Context().stats;
      if (m_sendBatch) {
        if (m_sendBatch->Full()) FlushLocked();
        if (m_sendBatch->Full()) {  // the socket is full and so is the batch: like a loss
          ++stats.sendErrors;
          return;
        }
        m_sendBatch->Add(to, data, size);
        return;
      }
      if (m_queuedHead == m_queuedCount) {
        boost::system::error_code error;
        ++m_counters.sendCalls;
        m_owner.m_socket.send_to(boost::asio::buffer(data, size), to, 0, error);
        if (!error) return;
        if (!WouldBlock(error)) {
          ++stats.sendErrors;  // e.g. no route: like a loss on the path
          return;
        }
      }
      // The socket buffer is full: keep the datagram (in order) until the socket can take it.
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
      QueuedDatagram& queued = m_queued[m_queuedCount];
      // The bytes first (capacity is reused after the first time): a copy that cannot get its
      // memory leaves the slot unqueued, and the throw makes the datagram a counted loss.
      queued.bytes.assign(data, data + size);
      queued.to = to;
      ++m_queuedCount;
      if (!m_sending) SendQueuedLocked();
    }

    void Flush(BatchEnd end) noexcept override {
      if (m_owner.m_closed || !m_sendBatch || m_sendBatch->Empty()) return;
      if (end == BatchEnd::Call) return FlushLocked();
      // A timer expiry: the timer driver runs every due expiry in one handler, so a flush queued
      // behind it sends what all of them produced together (e.g. the delayed ACKs of many
      // connections) without delaying any past the end of that dispatch. Its memory is reserved
      // (Impl's constructor).
      if (m_flushQueued) return;
      std::shared_ptr<Impl> self = m_owner.weak_from_this().lock();
      if (!self) return FlushLocked();  // the endpoint is being destroyed: no later flush
      boost::asio::post(m_owner.m_ioContext,
                        WithMemory(m_owner.m_handlerMemory, [self = std::move(self), this] {
                          const auto lock = m_engine->Lock();
                          m_flushQueued = false;
                          FlushLocked();
                        }));
      m_flushQueued = true;  // after the post: its handler takes the shard's lock, held here
    }

    detail::Microseconds Now() const override { return TransportClock::Now(); }

    // The shard's completions run in the order the engine made them (it calls this under the
    // shard's lock), by one operation at a time that runs all that are queued. On an io thread
    // that operation is deferred to the thread's own queue: it runs here once the current
    // handler returns and wakes no other thread. Posted one by one, each completion woke the
    // idle thread of a two-thread io_context, whose handler then called into the shard the first
    // thread held (Perf/RESULTS.md, "Threads"). One queue keeps the order that a deferred
    // completion alone would break: one made meanwhile by another thread would overtake it.
    // What can fail (the queue's growth, the operation's memory) comes before `handler` is
    // taken, so a failed post leaves it with the caller (IEndpointIo::Post).
    void Post(detail::Completion& handler, detail::EngineError error) override {
      std::lock_guard<std::mutex> lock(m_completionMutex);
      if (!m_completionsScheduled) {
        std::shared_ptr<Impl> self = m_owner.weak_from_this().lock();
        // While the endpoint is destroyed (a failed construction) nothing holds it: the
        // completion goes to the io_context on its own, from the heap.
        if (!self) return m_owner.PostCompletion(handler, error);
        detail::MakeRoomForOne(m_completions);
        ScheduleCompletionsLocked(std::move(self));
        m_completionsScheduled = true;
      } else {
        detail::MakeRoomForOne(m_completions);
      }
      m_completions.push_back({std::move(handler), error});  // room made: cannot throw
    }

   private:
    struct QueuedDatagram {
      Udp::endpoint to;
      std::vector<std::uint8_t> bytes;
    };
    struct QueuedCompletion {
      detail::Completion handler;
      detail::EngineError error;
    };

    // Under m_completionMutex. The operation holds the endpoint (`self`).
    void ScheduleCompletionsLocked(std::shared_ptr<Impl> self) {
      DeferOrPost(m_owner.m_ioContext,
                  WithMemory(m_owner.m_handlerMemory,
                             [self = std::move(self), this] { RunCompletions(); }));
    }

    // Runs the completions queued when it starts (those queued while they run wait for the next
    // operation: other handlers get their turn). The vectors swap, so both keep their capacity
    // and nothing here allocates once warm. Each handler is destroyed as it returns, outside the
    // queue's lock: its captures may hold the last reference to a Connection, whose destructor
    // takes the shard's lock, which Post holds when it takes the queue's. If a handler throws,
    // the ones after it stay in m_running and run first, in the next operation: once each, as
    // promised, and in order.
    void RunCompletions() {
      if (m_runningNext == m_running.size()) {
        m_running.clear();
        m_runningNext = 0;
        std::lock_guard<std::mutex> lock(m_completionMutex);
        m_running.swap(m_completions);
      }
      try {
        while (m_runningNext < m_running.size()) {
          QueuedCompletion& queued = m_running[m_runningNext++];
          detail::Completion handler = std::move(queued.handler);
          handler(queued.error);
        }
      } catch (...) {
        ScheduleNextRun();
        throw;  // out of io_context::run, as from any handler
      }
      ScheduleNextRun();
    }

    // After a run: the next is scheduled if anything waits (the rest of a run whose handler
    // threw, or completions made meanwhile). If it cannot be (no memory), the next Post does it.
    void ScheduleNextRun() {
      std::lock_guard<std::mutex> lock(m_completionMutex);
      m_completionsScheduled = false;
      if (m_runningNext == m_running.size() && m_completions.empty()) return;
      ScheduleCompletionsLocked(m_owner.shared_from_this());  // RunCompletions' `self` holds it
      m_completionsScheduled = true;
    }

    void SendQueuedLocked() {
      if (m_queuedHead == m_queuedCount) {
        m_queuedHead = m_queuedCount = 0;
        m_sending = false;
        return;
      }
      std::lock_guard<std::mutex> lock(m_owner.m_socketMutex);
      if (m_owner.m_closed) return;
      ++m_counters.sendCalls;
      QueuedDatagram& next = m_queued[m_queuedHead];
      m_owner.m_socket.async_send_to(
          boost::asio::buffer(next.bytes), next.to,
          WithMemory(m_owner.m_handlerMemory,
                     [self = m_owner.shared_from_this(), this](
                         const boost::system::error_code& error, std::size_t) {
                       const auto shardLock = m_engine->Lock();
                       if (m_owner.m_closed) return;
                       if (error) ++m_engine->Core().Context().stats.sendErrors;
                       ++m_queuedHead;
                       SendQueuedLocked();
                     }));
      // Marked sending only once the send is started (it may fail to get its memory; the next
      // SendDatagram then starts it again); the handler takes the shard's lock, held here.
      m_sending = true;
    }

    Impl& m_owner;
    TransportClock m_clock;
    std::unique_ptr<IManageTimerQueue> m_queue;
    std::unique_ptr<AsioTimerQueue> m_timers;
    Milliseconds m_granularity = 1;
    std::optional<detail::LockedEngine> m_engine;
    std::optional<udp::SendBatch> m_sendBatch;  // batched path only
    bool m_waitingWritable = false;             // a wait_write is pending; it flushes the batch
    bool m_flushQueued = false;                 // a flush is posted behind the timer dispatch
    udp::BatchCounters m_counters;              // the unbatched path's sends
    std::vector<QueuedDatagram> m_queued;       // [m_queuedHead, m_queuedCount) wait to be sent
    std::size_t m_queuedHead = 0;
    std::size_t m_queuedCount = 0;
    bool m_sending = false;
    std::mutex m_completionMutex;                 // guards m_completions and m_completionsScheduled
    std::vector<QueuedCompletion> m_completions;  // made by the engine, waiting to run
    std::vector<QueuedCompletion> m_running;      // the running operation's (it alone uses it)
    std::size_t m_runningNext = 0;                // m_running's first not yet run
    bool m_completionsScheduled = false;          // an operation will run m_completions
    std::uint64_t m_ticketsIssued = 0;            // under the owner's m_socketMutex
    std::uint64_t m_serving = 0;                  // the ticket whose turn it is
    std::condition_variable m_turn;               // m_serving moved on
  };

  // A set of buffers one read of the socket fills: a ReceiveBatch (batched path), or up to
  // kReceiveMessages datagrams, the first from an overlapped receive and the rest drained. At most
  // one receiver reads or waits on the socket at a time, so the datagrams of consecutive reads
  // are in arrival order; the shards' tickets (TakeTicketsLocked) keep that order while several
  // receivers hand their datagrams over in parallel.
  struct Receiver {
    Receiver() {
      shardOf.reserve(kReceiveMessages * 64);  // a full batch of full GRO messages
    }
    template <class Visit>
    void ForEachDatagram(Visit&& visit) const {
      if (batch) return batch->ForEachDatagram(visit);
      for (std::size_t i = 0; i < count; ++i) visit(senders[i], Slot(i), sizes[i]);
    }
    std::uint8_t* Slot(std::size_t i) const { return bytes.get() + i * kSlotSize; }

    static constexpr std::size_t kSlotSize = 65536;
    std::optional<udp::ReceiveBatch> batch;         // batched path only
    std::optional<udp::ReadableWait> readableWait;  // batched path, where the build has it
    Impl* owner = nullptr;
    std::unique_ptr<std::uint8_t[]> bytes;  // unbatched path only: kReceiveMessages slots
    std::array<Udp::endpoint, kReceiveMessages> senders;
    std::array<std::size_t, kReceiveMessages> sizes{};
    std::size_t count = 0;
    udp::BatchCounters counters;  // the unbatched path's receives
    bool busy = false;            // reading, waiting or handing over (under m_socketMutex)
    // The hand-over (TakeTicketsLocked): the shard of each datagram (kResetShard: by its
    // token), the shards it has datagrams for, and its turn in each of them.
    std::vector<std::uint8_t> shardOf;
    std::uint64_t shards = 0;
    std::array<std::uint64_t, 64> tickets{};
  };
  static constexpr std::uint8_t kResetShard = 0xff;
  static constexpr std::uint8_t kHandled = 0xfe;

  // SharedAcceptWaiters: a shard's connection was established, or Accept's sweep found one (the
  // shard's lock is held). `serve` posts the waiter's completion (a shard's m_completionMutex).
  bool ServeOldestWaiter(const std::function<void(ConnectCompletion&)>& serve) override {
    std::lock_guard<std::mutex> lock(m_acceptMutex);
    if (m_acceptWaiters.empty()) return false;
    serve(m_acceptWaiters.front());  // if it throws, the waiter stays first
    m_acceptWaiters.pop_front();
    return true;
  }

  // Wraps a user's handler so that it receives a public Connection, tied to its shard's engine.
  ConnectCompletion Wrap(ConnectHandler handler) {
    return [self = shared_from_this(), handler = std::move(handler)](
               detail::EngineError error,
               const std::shared_ptr<detail::ConnectionCore>& state) mutable {
      std::shared_ptr<Connection> connection;
      boost::system::error_code result = detail::ToErrorCode(error);
      if (state) {
        Shard& shard = *self->m_shards[state->LocalId() % self->m_shards.size()];
        connection =
            Connection::Make(std::shared_ptr<detail::LockedEngine>(self, &shard.Engine()), state);
        if (!connection) result = boost::asio::error::no_memory;
      }
      handler(result, std::move(connection));
    };
  }

  // Under m_acceptMutex, once m_acceptClosed: makes sure that one operation will fail every
  // waiter queued (RunClosedAcceptWaiters). Cannot fail: at most one is outstanding, and its
  // block is reserved (Impl's constructor). While the endpoint is destroyed (a failed
  // construction) nothing holds it, and no accept was ever made.
  void ScheduleClosedAcceptWaitersLocked() noexcept {
    if (m_closedWaitersScheduled || m_acceptWaiters.empty()) return;
    std::shared_ptr<Impl> self = weak_from_this().lock();
    if (!self) return;
    boost::asio::post(m_ioContext, WithMemory(m_handlerMemory, [self = std::move(self)] {
                        self->RunClosedAcceptWaiters();
                      }));
    m_closedWaitersScheduled = true;
  }

  // Fails the accept waiters with EndpointClosed, in order: those queued when it starts (an
  // accept made meanwhile, by one of them say, waits for the next run: other handlers get their
  // turn). Each leaves the queue as it is called, so each is called once, and is called and
  // destroyed outside m_acceptMutex (it may hold a Connection, or call back in). Afterwards, or
  // if one throws (before the exception goes on, out of io_context::run), the next run is
  // scheduled if any is left: this operation's block is free again by then.
  void RunClosedAcceptWaiters() {
    std::size_t left = 0;
    {
      std::lock_guard<std::mutex> lock(m_acceptMutex);
      left = m_acceptWaiters.size();
    }
    try {
      for (; left > 0; --left) {
        ConnectCompletion waiter;
        {
          std::lock_guard<std::mutex> lock(m_acceptMutex);
          if (m_acceptWaiters.empty()) break;
          waiter = std::move(m_acceptWaiters.front());
          m_acceptWaiters.pop_front();
        }
        waiter(detail::EngineError::EndpointClosed, nullptr);
      }
    } catch (...) {
      ScheduleNextClosedAcceptWaitersRun();
      throw;
    }
    ScheduleNextClosedAcceptWaitersRun();
  }
  void ScheduleNextClosedAcceptWaitersRun() noexcept {
    std::lock_guard<std::mutex> lock(m_acceptMutex);
    m_closedWaitersScheduled = false;
    ScheduleClosedAcceptWaitersLocked();
  }

  // Posts `handler` on its own. While the endpoint is being destroyed (a failed construction):
  // from the heap, holding nothing. A shared box lets a failed post give `handler` back.
  void PostCompletion(detail::Completion& handler, detail::EngineError error) {
    auto box = std::make_shared<detail::Completion>(std::move(handler));
    try {
      boost::asio::post(m_ioContext, [box, error] { (*box)(error); });
    } catch (...) {
      handler = std::move(*box);
      throw;
    }
  }

  // Starts the next read of the socket on a free receiver, unless one is under way (or every
  // receiver is handing over: the first to finish starts it). Under m_socketMutex.
  void ArmLocked() {
    if (m_closed || m_reading) return;
    Receiver* free = nullptr;
    for (auto& receiver : m_receivers) {
      if (!receiver->busy) {
        free = receiver.get();
        break;
      }
    }
    if (free == nullptr) return;
    Receiver& receiver = *free;
    receiver.busy = true;
    m_reading = true;
    if (receiver.batch && m_moreToRead) {
      // Asio's epoll reactor is edge-triggered and does not read ahead for a wait, so a wait
      // would sleep until the next datagram arrives: read again through the io_context's queue,
      // after whatever else is ready (fair to timers and other sockets).
      boost::asio::post(m_ioContext,
                        WithMemory(m_handlerMemory, [self = shared_from_this(), &receiver] {
                          self->OnReadable(receiver, boost::system::error_code());
                        }));
    } else if (receiver.readableWait) {  // no epoll_ctl per wait (UdpSocket/ReadableWait.h)
      receiver.readableWait->Start(shared_from_this(), &Impl::OnReadableWaitDone, &receiver);
    } else if (receiver.batch) {
      m_socket.async_wait(Udp::socket::wait_read,
                          WithMemory(m_handlerMemory, [self = shared_from_this(), &receiver](
                                                          const boost::system::error_code& error) {
                            self->OnReadable(receiver, error);
                          }));
    } else {
      m_socket.async_receive_from(
          boost::asio::buffer(receiver.Slot(0), Receiver::kSlotSize), receiver.senders[0],
          WithMemory(m_handlerMemory,
                     [self = shared_from_this(), &receiver](const boost::system::error_code& error,
                                                            std::size_t size) {
                       self->OnReceive(receiver, error, size);
                     }));
    }
  }

  // The read failed: counted, and re-armed at once while errors are isolated, with a growing
  // delay while they persist (stopping would strand every connection). Under m_socketMutex.
  void OnReadErrorLocked(Receiver& receiver) {
    ++m_receiveErrors;
    receiver.busy = false;
    // The re-arm reads before it waits: a readable wait wakes only for datagrams that come after
    // a read that drained the socket, and this read drained nothing.
    m_moreToRead = true;
    m_receiveBackoff.OnError([self = shared_from_this()] {
      std::lock_guard<std::mutex> lock(self->m_socketMutex);
      self->ArmLocked();
    });
  }

  // A wait or receive of `receiver` completed: no read is in flight now. False if the receiver
  // is done (the endpoint closed, or the read failed and was handed to the back-off). Under
  // m_socketMutex.
  bool ReadCompletedLocked(Receiver& receiver, const boost::system::error_code& error) {
    m_reading = false;
    if (m_closed || error == boost::asio::error::operation_aborted) {
      receiver.busy = false;
      return false;
    }
    if (error) {
      OnReadErrorLocked(receiver);
      return false;
    }
    return true;
  }

  // `receiver` holds a read's datagrams: their turns are taken, and the next read starts on
  // another receiver while this one hands over, but only if this one filled its batch (a backlog
  // to share). Otherwise it starts after the hand-over, as with one receiver: a second reader
  // woken for a trickle would read smaller batches and send smaller ones. Under m_socketMutex.
  void ReadDoneLocked(Receiver& receiver, bool full) {
    m_moreToRead = full;
    TakeTicketsLocked(receiver);
    if (m_moreToRead) ArmLocked();
  }

  static void OnReadableWaitDone(void* context, const boost::system::error_code& error) {
    Receiver& receiver = *static_cast<Receiver*>(context);
    receiver.owner->OnReadable(receiver, error);
  }

  // The batched path: the socket has something to read (or failed).
  void OnReadable(Receiver& receiver, const boost::system::error_code& waitError) {
    {
      std::lock_guard<std::mutex> lock(m_socketMutex);
      if (!ReadCompletedLocked(receiver, waitError)) return;
      std::size_t messages = 0;
      for (;;) {
        boost::system::error_code error;
        messages = receiver.batch->Receive(m_socket, error);
        if (messages != 0) break;
        if (WouldBlock(error)) {  // a spurious wake-up, or another read took it: wait again
          m_moreToRead = false;
          receiver.busy = false;
          return ArmLocked();
        }
        if (!IsBenignReceiveError(error)) return OnReadErrorLocked(receiver);
        ++m_receiveErrors;  // an ICMP report: skipped
      }
      m_receiveBackoff.OnReceived();
      ReadDoneLocked(receiver, messages == kReceiveMessages);
    }
    HandOver(receiver);
  }

  // The unbatched path: one datagram arrived (or the receive failed).
  void OnReceive(Receiver& receiver, const boost::system::error_code& error, std::size_t size) {
    {
      std::lock_guard<std::mutex> lock(m_socketMutex);
      if (!ReadCompletedLocked(receiver, error)) return;
      m_receiveBackoff.OnReceived();
      ++receiver.counters.receiveCalls;
      receiver.sizes[0] = size;
      receiver.count = 1;
      // Drain what else is already there without another trip through the reactor or IOCP,
      // before the next receive starts: the datagrams stay in arrival order.
      for (int attempts = 1; receiver.count < kReceiveMessages && attempts < kReceiveBatch;
           ++attempts) {
        const std::size_t slot = receiver.count;
        boost::system::error_code drainError;
        const std::size_t drained =
            m_socket.receive_from(boost::asio::buffer(receiver.Slot(slot), Receiver::kSlotSize),
                                  receiver.senders[slot], 0, drainError);
        if (WouldBlock(drainError)) break;
        if (drainError) {
          ++m_receiveErrors;
          if (!IsBenignReceiveError(drainError)) break;
          continue;
        }
        ++receiver.counters.receiveCalls;
        receiver.sizes[slot] = drained;
        ++receiver.count;
      }
      ReadDoneLocked(receiver, receiver.count == kReceiveMessages);
    }
    HandOver(receiver);
  }

  // Which shard each datagram of the receiver's read goes to, and the read's turn in each of
  // those shards: turns are taken here, under m_socketMutex, in the order reads happen. A Reset
  // (which names the peer's connection ID, not ours) takes a turn in every shard and goes to the
  // one that knows its token. Under m_socketMutex.
  void TakeTicketsLocked(Receiver& receiver) {
    receiver.shardOf.clear();
    receiver.shards = 0;
    bool reset = false;
    receiver.ForEachDatagram(
        [&](const Udp::endpoint& from, const std::uint8_t* data, std::size_t size) {
          const std::size_t shard = m_steering.ShardOf(detail::ToAddress(from), data, size);
          if (shard == detail::ShardSteering::kByResetToken) {
            receiver.shardOf.push_back(kResetShard);
            reset = true;
            return;
          }
          receiver.shardOf.push_back(static_cast<std::uint8_t>(shard));
          receiver.shards |= std::uint64_t{1} << shard;
        });
    if (reset) {
      receiver.shards =
          m_shards.size() == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << m_shards.size()) - 1;
    }
    for (std::size_t shard = 0; shard < m_shards.size(); ++shard) {
      if ((receiver.shards >> shard) & 1) receiver.tickets[shard] = m_shards[shard]->TakeTicket();
    }
  }

  // Hands the receiver's datagrams to their shards' engines, each shard's in its turn (so a
  // connection's datagrams reach it in arrival order), then frees the receiver. Each shard's
  // lock is taken once for all of its datagrams, and its sends leave together at the end.
  void HandOver(Receiver& receiver) {
    const std::size_t last = m_shards.size() - 1;
    std::size_t index = 0;
    try {
      HandOverFrom(receiver, index);
    } catch (...) {
      // A datagram's handling threw (the engine itself drops those that run out of memory): the
      // read's other turns are still served and the socket read again, or the endpoint would
      // stop receiving. Then it goes on, out of io_context::run.
      for (++index; index <= last; ++index) {
        if (((receiver.shards >> index) & 1) == 0) continue;
        m_shards[index]->InTurn(receiver.tickets[index], [](detail::EndpointCore&) {});
      }
      ReadAgain(receiver);
      throw;
    }
    ReadAgain(receiver);
  }

  // HandOver's loop over the shards, from `index` on; `index` is left at the shard it serves.
  void HandOverFrom(Receiver& receiver, std::size_t& index) {
    const std::size_t last = m_shards.size() - 1;
    for (; index <= last; ++index) {
      if (((receiver.shards >> index) & 1) == 0) continue;
      Shard& shard = *m_shards[index];
      shard.InTurn(receiver.tickets[index], [&](detail::EndpointCore& core) {
        // The clock, read as the shard's turn starts (the read's datagrams arrived before it)
        // and again every kDatagramsPerClockRead datagrams, so that a long turn (up to a
        // thousand coalesced datagrams) neither arms timers nor stamps packets from a stale time.
        detail::Microseconds now = core.Now();
        std::size_t handled = 0;
        std::size_t i = 0;
        receiver.ForEachDatagram(
            [&](const Udp::endpoint& from, const std::uint8_t* data, std::size_t size) {
              std::uint8_t& target = receiver.shardOf[i++];
              if (target == kResetShard) {
                detail::ResetToken token{};
                const bool known = detail::ShardSteering::ResetTokenOf(data, size, token) &&
                                   core.KnowsResetToken(token);
                if (!known && index != last) return;  // another shard's, or nobody's (counted last)
                target = kHandled;
              } else if (target != index) {
                return;
              }
              if (++handled % kDatagramsPerClockRead == 0) now = core.Now();
              core.OnDatagram(detail::ToAddress(from), data, size, now);
            });
      });
    }
  }

  void ReadAgain(Receiver& receiver) {
    std::lock_guard<std::mutex> lock(m_socketMutex);
    receiver.busy = false;
    ArmLocked();  // if every receiver was busy, the read waits for this one
  }

  // First, so last to go: the operations of every handler below live here.
  HandlerMemory m_handlerMemory;
  boost::asio::io_context& m_ioContext;
  Udp::socket m_socket;
  const bool m_batched;
  const detail::ShardSteering m_steering;
  std::optional<detail::SharedAdmission> m_admission;  // the shards' (thread-safe)
  std::mutex m_socketMutex;
  // Set under every shard's mutex and m_socketMutex: read under either.
  bool m_closed = false;
  std::uint64_t m_receiveErrors = 0;       // under m_socketMutex
  std::uint64_t m_receiveBufferDrops = 0;  // the socket's last count, read as it closed
  udp::SocketBufferSizes m_bufferSizes;    // as granted; set once, before any thread sees it
  bool m_reading = false;                  // a receiver reads or waits (under m_socketMutex)
  bool m_moreToRead = false;               // the last read filled its batch (under m_socketMutex)
  udp::ReceiveErrorBackoff m_receiveBackoff{m_socket.get_executor()};  // under m_socketMutex
  std::vector<std::unique_ptr<Receiver>> m_receivers;
  std::vector<std::unique_ptr<Shard>> m_shards;
  std::atomic<std::size_t> m_nextConnectShard{0};
  std::mutex m_acceptMutex;
  bool m_acceptClosed = false;                    // under m_acceptMutex
  std::deque<ConnectCompletion> m_acceptWaiters;  // under m_acceptMutex
  bool m_closedWaitersScheduled = false;          // a run will fail them (under m_acceptMutex)
};

Endpoint::Endpoint(boost::asio::io_context& ioContext, const Udp::endpoint& local,
                   EndpointOptions options)
    : m_impl(std::make_shared<Impl>(ioContext, local, ValidateOptions(std::move(options)))) {
  m_impl->Start();
}

Endpoint::~Endpoint() { Close(); }

Udp::endpoint Endpoint::LocalEndpoint() const { return m_impl->LocalEndpoint(); }

void Endpoint::AsyncConnect(const Udp::endpoint& remote, ConnectHandler handler) {
  m_impl->Connect(remote, std::move(handler));
}

void Endpoint::AsyncAccept(ConnectHandler handler) { m_impl->Accept(std::move(handler)); }

void Endpoint::Close() { m_impl->Close(); }

EndpointStatistics Endpoint::GetStatistics() const { return m_impl->Statistics(); }

}  // namespace timerwheel::rudp
