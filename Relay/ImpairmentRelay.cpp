// ImpairmentRelay: sockets, the per-direction delivery queues and their timers around two
// LinkModels.
//
// Locking rules: one mutex, State::m_mutex, guards everything in State: both LinkModels and
// their counters, both delivery queues, the datagram slots, the client table, every operation on
// every socket (receive initiation, the non-blocking receive drain, sends, close) and on both
// timers (expires_at, async_wait, cancel), and m_closed. So no socket or timer is ever used from
// two threads at once, whichever threads run the io_context. Completion handlers are called
// without it and take it first; they hold the State by shared_ptr, and once m_closed is set they
// return without touching anything else. Nothing else is locked inside it, and no user code runs
// under it except WaitForCounters' predicate. m_changed (a condition variable on m_mutex) is
// notified after every batch of datagrams received or sent, and on Close.
//
// Batched I/O (UdpSocket/DatagramBatch; Linux): after the overlapped receive that wakes a socket
// up, what else is waiting is read with recvmmsg; the deliveries one handler makes due leave with
// sendmmsg (and UDP_SEGMENT for runs to one address). Each datagram still goes through the
// LinkModel on its own. No UDP_GRO: the first read of each wake-up is Asio's, which cannot see
// the segment size of a coalesced buffer.
#include "Relay/ImpairmentRelay.h"

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <utility>
#include <vector>

#include "Relay/Detail/LinkModel.h"
#include "UdpSocket/DatagramBatch.h"
#include "UdpSocket/UdpSocketSetup.h"

namespace timerwheel::relay {
namespace {

using Udp = boost::asio::ip::udp;
using Clock = std::chrono::steady_clock;

// Datagrams read per wake-up before the receive is re-armed: amortises the completion.
constexpr int kReceiveBatch = 64;
// Asked of the OS for every socket (it may cap it): the relay must not be the bottleneck.
constexpr int kSocketBufferBytes = 4 << 20;
constexpr std::size_t kMaxDatagram = 65536;
// Messages per recvmmsg, and datagrams held per socket for one sendmmsg. Their buffers are not
// zeroed, so a socket only ever touches the pages its traffic uses.
constexpr std::size_t kReceiveMessages = 16;
constexpr std::size_t kSendBatch = 64;

bool WouldBlock(const boost::system::error_code& error) {
  return error == boost::asio::error::would_block || error == boost::asio::error::try_again;
}

void Configure(Udp::socket& socket) {
  boost::system::error_code ignored;  // all best effort
  socket.non_blocking(true, ignored);
  udp::SetSocketBufferSizes(socket, kSocketBufferBytes, kSocketBufferBytes);
  // Otherwise an ICMP report caused by one send fails the next receive. If it cannot be turned
  // off the relay still works (receive errors are counted and the receive re-armed): say so.
  if (const auto icmp = udp::DisableIcmpErrorReports(socket); icmp.error) {
    std::fprintf(stderr, "ImpairmentRelay: turning off %s failed: %s\n", icmp.what,
                 icmp.error.message().c_str());
  }
}

void ThrowIfInvalid(const ImpairmentProfile& toUpstream, const ImpairmentProfile& toClient) {
  if (const std::string problem = toUpstream.Validate(); !problem.empty()) {
    throw std::invalid_argument("toUpstream profile: " + problem);
  }
  if (const std::string problem = toClient.Validate(); !problem.empty()) {
    throw std::invalid_argument("toClient profile: " + problem);
  }
}

}  // namespace

class ImpairmentRelay::State final : public std::enable_shared_from_this<State> {
 public:
  State(boost::asio::io_context& ioContext, const Endpoint& listen, const Endpoint& upstream,
        const ImpairmentProfile& toUpstream, const ImpairmentProfile& toClient, std::uint64_t seed)
      : m_ioContext(ioContext),
        m_upstream(upstream),
        m_epoch(Clock::now()),
        m_clockRoom(ClockRoom(m_epoch)),
        m_listen(ioContext),
        m_toUpstream(ioContext, toUpstream, seed),
        m_toClient(ioContext, toClient, ~seed) {
    m_listen.open(listen.protocol());
    m_listen.bind(listen);
    Configure(m_listen);
  }

  void Start() {
    std::lock_guard<std::mutex> lock(m_mutex);
    StartListenReceiveLocked();
  }

  Endpoint LocalEndpoint() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    boost::system::error_code error;
    return m_listen.local_endpoint(error);
  }

  LinkCounters ToUpstreamCounters() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return CountersLocked(m_toUpstream);
  }

  LinkCounters ToClientCounters() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return CountersLocked(m_toClient);
  }

  std::size_t ClientCount() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_clients.size();
  }

  void SetProfiles(const ImpairmentProfile& toUpstream, const ImpairmentProfile& toClient) {
    ThrowIfInvalid(toUpstream, toClient);
    std::lock_guard<std::mutex> lock(m_mutex);
    m_toUpstream.model.SetProfile(toUpstream);
    m_toClient.model.SetProfile(toClient);
  }

  bool WaitForCounters(const std::function<bool(const LinkCounters&, const LinkCounters&)>& done,
                       std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(m_mutex);
    return m_changed.wait_for(lock, timeout, [&] {
      return done(CountersLocked(m_toUpstream), CountersLocked(m_toClient));
    });
  }

  void Close() {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_closed) return;
    m_closed = true;
    boost::system::error_code ignored;
    m_listen.close(ignored);  // pending receives complete with operation_aborted
    m_listenBackoff.Cancel();
    for (auto& entry : m_clients) {
      entry.second->socket.close(ignored);
      entry.second->backoff.Cancel();
    }
    for (Direction* direction : {&m_toUpstream, &m_toClient}) {
      direction->timer.cancel();
      direction->queue = {};
    }
    m_slots.clear();
    m_freeSlots.clear();
    m_changed.notify_all();
  }

 private:
  // One client: its address and the socket that speaks for it to the upstream. Never destroyed
  // before the State, so handlers may hold a raw pointer.
  struct Client {
    explicit Client(boost::asio::io_context& ioContext) : socket(ioContext) {}
    Endpoint address;
    Udp::socket socket;
    udp::ReceiveErrorBackoff backoff{socket.get_executor()};  // after socket
    std::vector<std::uint8_t> buffer = std::vector<std::uint8_t>(kMaxDatagram);
    udp::ReceiveBatch receiveBatch{kReceiveMessages};
    udp::SendBatch sendBatch{kSendBatch, kMaxDatagram, true};  // to the upstream
    bool flushPending = false;                                 // listed in m_clientsToFlush
  };

  // A datagram's bytes, shared by its copies when it is duplicated; reused once sent.
  struct Slot {
    std::vector<std::uint8_t> bytes;
    unsigned references = 0;
  };

  struct Pending {
    Microseconds at = 0;
    std::uint64_t sequence = 0;  // arrival order breaks ties: FIFO at equal times
    std::uint32_t slot = 0;
    Client* client = nullptr;
  };
  struct Later {
    bool operator()(const Pending& a, const Pending& b) const {
      return a.at != b.at ? a.at > b.at : a.sequence > b.sequence;
    }
  };

  enum class Which { ToUpstream, ToClient };

  struct Direction {
    Direction(boost::asio::io_context& ioContext, const ImpairmentProfile& profile,
              std::uint64_t seed)
        : model(profile, seed), timer(ioContext) {}
    detail::LinkModel model;
    std::priority_queue<Pending, std::vector<Pending>, Later> queue;  // earliest on top
    boost::asio::steady_timer timer;  // aimed at queue.top() while `armed`
    bool armed = false;
    Microseconds armedAt = 0;
    std::uint64_t generation = 0;  // of the latest wait; older waits were superseded
    std::uint64_t receiveErrors = 0;
    std::uint64_t sendErrors = 0;
  };

  static LinkCounters CountersLocked(const Direction& direction) {
    LinkCounters counters = direction.model.Counters();
    counters.receiveErrors = direction.receiveErrors;
    counters.sendErrors = direction.sendErrors;
    return counters;
  }

  Direction& Get(Which which) { return which == Which::ToUpstream ? m_toUpstream : m_toClient; }

  // How many whole microseconds the clock goes on after `epoch` (2^63 ns less its time since the
  // clock's own epoch).
  static Microseconds ClockRoom(Clock::time_point epoch) {
    const Clock::duration since = epoch.time_since_epoch();
    const Clock::duration room =
        Clock::duration::max() -
        (since > Clock::duration::zero() ? since : Clock::duration::zero());
    return static_cast<Microseconds>(
        std::chrono::duration_cast<std::chrono::microseconds>(room).count());
  }

  // The timer's deadline for a delivery at `at`. The model saturates its times at kLatestTime
  // (ImpairmentProfile.h), far inside the clock; checked all the same, since a time past the
  // clock's end would wrap to the past, fire at once, find nothing due and re-arm for ever: such
  // a deadline is the clock's end.
  Clock::time_point DeadlineFor(Microseconds at) const {
    if (at >= m_clockRoom) return Clock::time_point::max();
    return m_epoch + std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(at));
  }

  Microseconds Now() const {
    return static_cast<Microseconds>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - m_epoch).count());
  }

  // Receiving ---------------------------------------------------------------------------------

  void StartListenReceiveLocked() {
    m_listen.async_receive_from(
        boost::asio::buffer(m_listenBuffer), m_sender,
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t size) {
          self->OnListenReceive(error, size);
        });
  }

  void OnListenReceive(const boost::system::error_code& error, std::size_t size) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_closed || error == boost::asio::error::operation_aborted) return;
    if (error) {
      ++m_toUpstream.receiveErrors;  // e.g. an ICMP error from a send to a vanished client
      // The re-arm runs from the io_context (never inside OnError, which is under m_mutex).
      m_listenBackoff.OnError([self = shared_from_this()] {
        std::lock_guard<std::mutex> lock(self->m_mutex);
        if (!self->m_closed) self->StartListenReceiveLocked();
      });
      m_changed.notify_all();
      return;
    }
    m_listenBackoff.OnReceived();
    OnClientDatagramLocked(m_sender, m_listenBuffer.data(), size);
    // Drain what else is already there without another trip through the reactor or IOCP.
    for (int datagrams = 1; datagrams < kReceiveBatch;) {
      boost::system::error_code drainError;
      const std::uint64_t truncated = m_listenBatch.Counters().truncatedDatagrams;
      if (m_listenBatch.Receive(m_listen, drainError) == 0) {
        if (WouldBlock(drainError)) break;
        ++m_toUpstream.receiveErrors;
        ++datagrams;
        continue;
      }
      m_toUpstream.receiveErrors += m_listenBatch.Counters().truncatedDatagrams - truncated;
      m_listenBatch.ForEachDatagram(
          [&](const Endpoint& from, const std::uint8_t* data, std::size_t drained) {
            ++datagrams;
            OnClientDatagramLocked(from, data, drained);
          });
    }
    FlushLocked();
    StartListenReceiveLocked();
    m_changed.notify_all();
  }

  void OnClientDatagramLocked(const Endpoint& from, const std::uint8_t* data, std::size_t size) {
    Client* client = ClientLocked(from);
    if (client == nullptr) {
      ++m_toUpstream.sendErrors;  // no socket to forward it through
      return;
    }
    OnArrivalLocked(Which::ToUpstream, client, data, size);
  }

  // The client at `address`, with its upstream socket opened and receiving; nullptr if the
  // socket cannot be opened (e.g. out of descriptors): the next datagram tries again.
  Client* ClientLocked(const Endpoint& address) {
    const auto found = m_clients.find(address);
    if (found != m_clients.end()) return found->second.get();
    auto client = std::make_unique<Client>(m_ioContext);
    client->address = address;
    boost::system::error_code error;
    client->socket.open(m_upstream.protocol(), error);
    if (!error) client->socket.connect(m_upstream, error);  // binds an ephemeral port
    if (error) return nullptr;
    Configure(client->socket);
    Client* raw = client.get();
    m_clients.emplace(address, std::move(client));
    StartUpstreamReceiveLocked(raw);
    return raw;
  }

  void StartUpstreamReceiveLocked(Client* client) {
    client->socket.async_receive(boost::asio::buffer(client->buffer),
                                 [self = shared_from_this(), client](
                                     const boost::system::error_code& error, std::size_t size) {
                                   self->OnUpstreamReceive(client, error, size);
                                 });
  }

  void OnUpstreamReceive(Client* client, const boost::system::error_code& error, std::size_t size) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_closed || error == boost::asio::error::operation_aborted) return;
    if (error) {
      ++m_toClient.receiveErrors;  // e.g. connection_refused: nothing listens upstream
      client->backoff.OnError([self = shared_from_this(), client] {
        std::lock_guard<std::mutex> lock(self->m_mutex);
        if (!self->m_closed) self->StartUpstreamReceiveLocked(client);
      });
      m_changed.notify_all();
      return;
    }
    client->backoff.OnReceived();
    OnArrivalLocked(Which::ToClient, client, client->buffer.data(), size);
    for (int datagrams = 1; datagrams < kReceiveBatch;) {
      boost::system::error_code drainError;
      const std::uint64_t truncated = client->receiveBatch.Counters().truncatedDatagrams;
      if (client->receiveBatch.Receive(client->socket, drainError) == 0) {
        if (WouldBlock(drainError)) break;
        ++m_toClient.receiveErrors;
        ++datagrams;
        continue;
      }
      m_toClient.receiveErrors += client->receiveBatch.Counters().truncatedDatagrams - truncated;
      client->receiveBatch.ForEachDatagram(
          [&](const Endpoint&, const std::uint8_t* data, std::size_t drained) {
            ++datagrams;
            OnArrivalLocked(Which::ToClient, client, data, drained);
          });
    }
    FlushLocked();
    StartUpstreamReceiveLocked(client);
    m_changed.notify_all();
  }

  // The model decides; the deliveries wait in the direction's queue (those already due go now).
  void OnArrivalLocked(Which which, Client* client, const std::uint8_t* data, std::size_t size) {
    Direction& direction = Get(which);
    const std::uint32_t slot = AcquireSlotLocked();
    std::vector<std::uint8_t>& bytes = m_slots[slot].bytes;
    bytes.assign(data, data + size);  // the slot's capacity is reused
    direction.model.OnArrival(Now(), bytes, m_deliveries);
    m_slots[slot].references = static_cast<unsigned>(m_deliveries.count);
    if (m_deliveries.count == 0) {
      m_freeSlots.push_back(slot);
      return;
    }
    for (std::size_t copy = 0; copy < m_deliveries.count; ++copy) {
      direction.queue.push(Pending{m_deliveries.at[copy], m_sequence++, slot, client});
    }
    DispatchDueLocked(which);
    ArmLocked(which);
  }

  std::uint32_t AcquireSlotLocked() {
    if (!m_freeSlots.empty()) {
      const std::uint32_t slot = m_freeSlots.back();
      m_freeSlots.pop_back();
      return slot;
    }
    m_slots.emplace_back();
    return static_cast<std::uint32_t>(m_slots.size() - 1);
  }

  // Sending -----------------------------------------------------------------------------------

  // Moves what is due into the sockets' send batches; FlushLocked sends them. Each handler that
  // dispatches ends with FlushLocked, so nothing waits past the handler that made it due.
  void DispatchDueLocked(Which which) {
    Direction& direction = Get(which);
    const Microseconds now = Now();
    while (!direction.queue.empty() && direction.queue.top().at <= now) {
      const Pending due = direction.queue.top();
      direction.queue.pop();
      Slot& slot = m_slots[due.slot];
      const bool up = which == Which::ToUpstream;
      udp::SendBatch& batch = up ? due.client->sendBatch : m_listenSendBatch;
      if (batch.Full()) FlushOneLocked(up ? due.client->socket : m_listen, batch, direction);
      if (!batch.Full()) {
        batch.Add(up ? m_upstream : due.client->address, slot.bytes.data(), slot.bytes.size());
        if (up && !due.client->flushPending) {
          due.client->flushPending = true;
          m_clientsToFlush.push_back(due.client);
        }
      } else {
        ++direction.sendErrors;
      }
      if (--slot.references == 0) m_freeSlots.push_back(due.slot);
    }
  }

  // Sends what the batches hold. A send the socket refuses (would block, no route) is counted in
  // sendErrors and the datagram is lost, as the relay's contract says.
  void FlushLocked() {
    FlushOneLocked(m_listen, m_listenSendBatch, m_toClient);
    for (Client* client : m_clientsToFlush) {
      client->flushPending = false;
      FlushOneLocked(client->socket, client->sendBatch, m_toUpstream);
    }
    m_clientsToFlush.clear();
  }

  static void FlushOneLocked(Udp::socket& socket, udp::SendBatch& batch, Direction& direction) {
    if (batch.Empty()) return;
    const udp::SendBatch::FlushResult result = batch.Flush(socket);
    direction.sendErrors += result.failed;
    if (result.wouldBlock) direction.sendErrors += batch.DropPending();
  }

  // Aims the direction's timer at its earliest delivery, unless a wait for that or earlier is
  // already pending.
  void ArmLocked(Which which) {
    Direction& direction = Get(which);
    if (direction.queue.empty()) return;
    const Microseconds next = direction.queue.top().at;
    if (direction.armed && direction.armedAt <= next) return;
    direction.armed = true;
    direction.armedAt = next;
    const std::uint64_t generation = ++direction.generation;
    direction.timer.expires_at(DeadlineFor(next));  // cancels the older
    direction.timer.async_wait(
        [self = shared_from_this(), which, generation](const boost::system::error_code& error) {
          self->OnTimer(which, generation, error);
        });
  }

  void OnTimer(Which which, std::uint64_t generation, const boost::system::error_code& error) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_closed) return;
    Direction& direction = Get(which);
    if (generation == direction.generation) {
      direction.armed = false;
    } else if (error == boost::asio::error::operation_aborted) {
      return;  // superseded by an earlier deadline
    }
    // (A superseded wait that had expired before it was superseded still sends what is due.)
    DispatchDueLocked(which);
    FlushLocked();
    ArmLocked(which);
    m_changed.notify_all();
  }

  boost::asio::io_context& m_ioContext;
  const Endpoint m_upstream;
  const Clock::time_point m_epoch;  // Now() counts from here
  const Microseconds m_clockRoom;   // ClockRoom(m_epoch)

  mutable std::mutex m_mutex;
  mutable std::condition_variable m_changed;
  bool m_closed = false;
  Udp::socket m_listen;
  udp::ReceiveErrorBackoff m_listenBackoff{m_listen.get_executor()};  // after m_listen
  std::array<std::uint8_t, kMaxDatagram> m_listenBuffer{};
  Endpoint m_sender;
  udp::ReceiveBatch m_listenBatch{kReceiveMessages};
  udp::SendBatch m_listenSendBatch{kSendBatch, kMaxDatagram, true};  // to the clients
  std::vector<Client*> m_clientsToFlush;  // whose send batch holds something
  std::map<Endpoint, std::unique_ptr<Client>> m_clients;
  Direction m_toUpstream;
  Direction m_toClient;
  std::vector<Slot> m_slots;
  std::vector<std::uint32_t> m_freeSlots;
  std::uint64_t m_sequence = 0;
  detail::Deliveries m_deliveries;  // scratch
};

ImpairmentRelay::ImpairmentRelay(boost::asio::io_context& ioContext, const Endpoint& listen,
                                 const Endpoint& upstream, const ImpairmentProfile& toUpstream,
                                 const ImpairmentProfile& toClient, std::uint64_t seed) {
  ThrowIfInvalid(toUpstream, toClient);
  m_state = std::make_shared<State>(ioContext, listen, upstream, toUpstream, toClient, seed);
  m_state->Start();
}

// Close throws only if a mutex or a timer is broken, and then std::terminate is the right end.
// NOLINTNEXTLINE(bugprone-exception-escape)
ImpairmentRelay::~ImpairmentRelay() { Close(); }

ImpairmentRelay::Endpoint ImpairmentRelay::LocalEndpoint() const {
  return m_state->LocalEndpoint();
}

LinkCounters ImpairmentRelay::ToUpstreamCounters() const { return m_state->ToUpstreamCounters(); }

LinkCounters ImpairmentRelay::ToClientCounters() const { return m_state->ToClientCounters(); }

std::size_t ImpairmentRelay::ClientCount() const { return m_state->ClientCount(); }

void ImpairmentRelay::SetProfiles(const ImpairmentProfile& toUpstream,
                                  const ImpairmentProfile& toClient) {
  m_state->SetProfiles(toUpstream, toClient);
}

bool ImpairmentRelay::WaitForCounters(
    const std::function<bool(const LinkCounters&, const LinkCounters&)>& done,
    std::chrono::milliseconds timeout) const {
  return m_state->WaitForCounters(done, timeout);
}

void ImpairmentRelay::Close() { m_state->Close(); }

}  // namespace timerwheel::relay
