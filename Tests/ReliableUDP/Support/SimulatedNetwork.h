// A deterministic network and clock for ReliableUDP's sans-I/O endpoint: lossy links, virtual time.
#pragma once

#include <algorithm>
#include <boost/asio/ip/udp.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <queue>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/Detail/RoomForOne.h"
#include "ReliableUDP/EngineConversions.h"
#include "ReliableUDP/LockedEngine.h"
#include "TimerQueue/ITickProvider.h"
#include "TimerQueue/TimerQueue.h"
#include "TimerWheel/TimerWheel.h"

namespace timerwheel::test {

using Udp = boost::asio::ip::udp;
using rudp::detail::Microseconds;

// How one direction of a link treats datagrams. Decisions come from the network's seeded
// generator, so a run is reproducible from its seed.
struct LinkProfile {
  double loss = 0;              // probability a datagram is dropped
  double duplicate = 0;         // probability it is delivered twice
  double reorder = 0;           // probability it is held back by 1-3 extra delays (overtaken)
  double corrupt = 0;           // probability one byte is flipped (the CRC must catch it)
  Microseconds delay = 10'000;  // one-way
  Microseconds jitter = 0;      // uniform extra delay in [0, jitter]
  bool down = false;            // drops everything
  // A host that is not scheduled: for the first `stallFor` of every `stallEvery` the link holds
  // what it is given, and sends it, in order, when the stall ends (as a relay thread or a sender
  // descheduled on a busy machine does). 0: never.
  Microseconds stallEvery = 0;
  Microseconds stallFor = 0;
  // A bottleneck (0: none): datagrams leave one after another at `rate` bytes per second through
  // a drop-tail queue holding `queueBytes` (0: unbounded), after the random loss above.
  double rate = 0;
  std::size_t queueBytes = 0;
  // Links with the same nonzero number share one bottleneck queue (and one policer's bucket),
  // as several flows through one router do; 0: the link has its own.
  unsigned sharedBottleneck = 0;
  // A policer (0: none): a token bucket of `policerBurst` bytes filling at `policerRate` bytes per
  // second; a datagram finding too few tokens is dropped.
  double policerRate = 0;
  std::size_t policerBurst = 0;
};

class SimulatedNetwork;

// One endpoint on the simulated network: an EndpointCore with its own timer queue, whose clock
// is the network's. The network runs on one thread and calls the engine directly, without its
// lock; the lock exists (LockedEngine) only because the public Connection objects the tests use
// take it, and timer expiries pass through it on their way to the engine (never contended).
class SimulatedHost final : public rudp::detail::IEndpointIo {
 public:
  using ConnectHandler =
      std::function<void(boost::system::error_code, std::shared_ptr<rudp::Connection>)>;

  SimulatedHost(SimulatedNetwork& network, Udp::endpoint address,
                const rudp::EndpointOptions& options);
  ~SimulatedHost();

  const Udp::endpoint& Address() const noexcept { return m_address; }
  rudp::detail::EndpointCore& Core() { return m_engine->Core(); }
  IManageTimerQueue& Timers() { return *m_queue; }

  void Connect(const Udp::endpoint& remote, ConnectHandler handler);
  void Accept(ConnectHandler handler);
  // Delivers a datagram as if it came from `from` (tests inject crafted packets with this).
  void Deliver(const Udp::endpoint& from, const std::vector<std::uint8_t>& datagram);
  rudp::EndpointStatistics Statistics();
  void Shutdown();

  // IEndpointIo
  void SendDatagram(const rudp::detail::Address& to, const std::uint8_t* data,
                    std::size_t size) override;
  Microseconds Now() const override;
  void Post(rudp::detail::Completion& handler, rudp::detail::EngineError error) override;
  // From the network's seed and this host's port (not from the network's generator, whose
  // sequence decides every link's fate): a run repeats exactly.
  rudp::detail::SipHashKey SecretKey() override;

 private:
  class Ticks final : public ITickProvider {
   public:
    explicit Ticks(const SimulatedNetwork& network) : m_network(network) {}
    timerwheel::Ticks GetTickCount() const override;

   private:
    const SimulatedNetwork& m_network;
  };

  SimulatedNetwork& m_network;
  Udp::endpoint m_address;
  Ticks m_ticks;
  std::unique_ptr<IManageTimerQueue> m_queue;
  std::shared_ptr<rudp::detail::LockedEngine> m_engine;
};

class SimulatedNetwork {
 public:
  static constexpr Microseconds kStart = 1'000'000'000'123;  // odd, far from 0

  explicit SimulatedNetwork(std::uint64_t seed) : m_seed(seed), m_random(seed) {}
  std::uint64_t Seed() const noexcept { return m_seed; }

  Microseconds Now() const noexcept { return m_now; }

  // Hosts live as long as the network; addresses are 10.0.0.N:port.
  SimulatedHost& AddHost(unsigned short port, rudp::EndpointOptions options = {}) {
    const Udp::endpoint address(boost::asio::ip::make_address_v4("10.0.0.1"), port);
    m_hosts.push_back(
        std::make_unique<SimulatedHost>(*this, address, rudp::ValidateOptions(options)));
    return *m_hosts.back();
  }

  void SetDefaultLink(const LinkProfile& profile) { m_defaultLink = profile; }
  void SetLink(const Udp::endpoint& from, const Udp::endpoint& to, const LinkProfile& profile) {
    m_links[{from, to}] = profile;
  }
  LinkProfile& Link(const Udp::endpoint& from, const Udp::endpoint& to) {
    auto found = m_links.find({from, to});
    if (found == m_links.end())
      found = m_links.emplace(std::make_pair(from, to), m_defaultLink).first;
    return found->second;
  }

  // Runs the network (handlers, deliveries, timers, in time order) until `done()` or until
  // virtual time passes `deadline`. Returns done().
  bool RunUntil(const std::function<bool()>& done, Microseconds deadline) {
    for (;;) {
      RunPosted();
      if (done()) return true;
      Microseconds next = NextEvent();
      if (next == kNever || next > deadline) {
        if (m_now < deadline) m_now = deadline;
        return done();
      }
      if (next > m_now) m_now = next;
      DeliverDue();
      for (auto& host : m_hosts) {
        const InHost in(*this, host.get());
        host->Timers().HandleTimeouts();
      }
    }
  }
  bool RunFor(
      Microseconds duration, const std::function<bool()>& done = [] { return false; }) {
    return RunUntil(done, m_now + duration);
  }

  // Counters over all links.
  std::uint64_t Sent() const noexcept { return m_sent; }
  std::uint64_t Dropped() const noexcept { return m_dropped; }
  std::uint64_t Duplicated() const noexcept { return m_duplicated; }
  std::uint64_t Corrupted() const noexcept { return m_corrupted; }
  std::uint64_t Reordered() const noexcept { return m_reordered; }
  std::uint64_t QueueDrops() const noexcept { return m_queueDrops; }  // bottleneck queue full
  std::uint64_t Policed() const noexcept { return m_policed; }

  // Sees every datagram sent, before the link decides its fate (tests capture replies with it).
  std::function<void(const Udp::endpoint& from, const Udp::endpoint& to,
                     const std::vector<std::uint8_t>& datagram)>
      tap;

  // Told which host the network runs code of, each time that changes: the host a datagram is
  // delivered to, whose timers run, or whose posted handlers run; nullptr while the network's own
  // code runs (a datagram sent, a handler posted) and between calls into hosts. A test that
  // charges one host's allocations to an account sets it (MemoryPerConnectionTests).
  std::function<void(const SimulatedHost*)> onHostChange;

  // The next `failPosts` completions that `failPostsOf` posts throw std::bad_alloc, as a post
  // that cannot get its memory would (IEndpointIo::Post: the handler stays the caller's).
  const SimulatedHost* failPostsOf = nullptr;
  int failPosts = 0;

  // --- for SimulatedHost ---
  void Send(const Udp::endpoint& from, const Udp::endpoint& to, const std::uint8_t* data,
            std::size_t size) {
    const InHost in(*this, nullptr);
    ++m_sent;
    if (tap) tap(from, to, std::vector<std::uint8_t>(data, data + size));
    LinkProfile& link = Link(from, to);
    if (link.down || Chance(link.loss)) {
      ++m_dropped;
      return;
    }
    LinkState& state = link.sharedBottleneck != 0 ? m_sharedStates[link.sharedBottleneck]
                                                  : m_linkStates[{from, to}];
    if (link.policerRate > 0 && !Police(link, state, size)) {
      ++m_dropped;
      ++m_policed;
      return;
    }
    Microseconds departure = m_now;
    if (link.rate > 0) {
      const Microseconds start = std::max(m_now, state.busyUntil);
      const double queued = static_cast<double>(start - m_now) * link.rate / 1e6;
      if (link.queueBytes > 0 &&
          queued + static_cast<double>(size) > static_cast<double>(link.queueBytes)) {
        ++m_dropped;
        ++m_queueDrops;
        return;
      }
      state.busyUntil =
          start + static_cast<Microseconds>(static_cast<double>(size) * 1e6 / link.rate + 0.5);
      departure = state.busyUntil;
    }
    if (link.stallEvery > 0) {
      const Microseconds intoPeriod = departure % link.stallEvery;
      if (intoPeriod < link.stallFor) departure += link.stallFor - intoPeriod;
    }
    const int copies = Chance(link.duplicate) ? 2 : 1;
    if (copies == 2) ++m_duplicated;
    for (int copy = 0; copy < copies; ++copy) {
      InFlight datagram{departure + link.delay, m_sequence++, from, to,
                        std::vector<std::uint8_t>(data, data + size)};
      if (link.jitter > 0) {
        datagram.arrival += std::uniform_int_distribution<Microseconds>(0, link.jitter)(m_random);
      }
      if (Chance(link.reorder)) {
        ++m_reordered;
        datagram.arrival +=
            link.delay * std::uniform_int_distribution<Microseconds>(1, 3)(m_random);
      }
      if (Chance(link.corrupt) && !datagram.bytes.empty()) {
        ++m_corrupted;
        const auto at = std::uniform_int_distribution<std::size_t>(0, size - 1)(m_random);
        datagram.bytes[at] ^=
            static_cast<std::uint8_t>(std::uniform_int_distribution<int>(1, 255)(m_random));
      }
      m_inFlight.push(std::move(datagram));
    }
  }
  void Post(const SimulatedHost* host, rudp::detail::Completion& handler,
            rudp::detail::EngineError error) {
    const InHost in(*this, nullptr);
    if (host == failPostsOf && failPosts > 0) {
      --failPosts;
      throw std::bad_alloc();
    }
    rudp::detail::MakeRoomForOne(m_posted);
    m_posted.push_back(Posted{host, std::move(handler), error});  // room made: cannot throw
  }
  void RunPosted() {
    // Handlers may post more; run until quiet. Index loop: the vector may grow meanwhile.
    std::size_t i = 0;
    try {
      for (; i < m_posted.size(); ++i) {
        auto handler = std::move(m_posted[i].handler);
        const auto error = m_posted[i].error;
        const InHost in(*this, m_posted[i].host);
        handler(error);
      }
    } catch (...) {
      // A handler threw (as out of io_context::run): it and those before it have run, the rest
      // run next time.
      m_posted.erase(m_posted.begin(), m_posted.begin() + static_cast<std::ptrdiff_t>(i + 1));
      throw;
    }
    m_posted.clear();
  }

 private:
  static constexpr Microseconds kNever = ~Microseconds{0};

  // Makes `host` the one whose code runs (onHostChange) for its lifetime.
  class InHost {
   public:
    InHost(SimulatedNetwork& network, const SimulatedHost* host)
        : m_network(network), m_previous(network.m_currentHost) {
      network.SetCurrentHost(host);
    }
    ~InHost() { m_network.SetCurrentHost(m_previous); }
    InHost(const InHost&) = delete;
    InHost& operator=(const InHost&) = delete;

   private:
    SimulatedNetwork& m_network;
    const SimulatedHost* m_previous;
  };
  void SetCurrentHost(const SimulatedHost* host) {
    if (host == m_currentHost) return;
    m_currentHost = host;
    if (onHostChange) onHostChange(host);
  }

  struct Posted {
    const SimulatedHost* host;  // whose handler it is
    rudp::detail::Completion handler;
    rudp::detail::EngineError error;
  };

  struct InFlight {
    Microseconds arrival;
    std::uint64_t sequence;
    Udp::endpoint from;
    Udp::endpoint to;
    std::vector<std::uint8_t> bytes;
    bool operator>(const InFlight& other) const {
      return arrival != other.arrival ? arrival > other.arrival : sequence > other.sequence;
    }
  };

  // What a link's bottleneck and policer remember between datagrams.
  struct LinkState {
    Microseconds busyUntil = 0;  // when the bottleneck has sent everything queued
    double tokens = -1;          // the policer's bucket, bytes (-1: not started, full)
    Microseconds refilled = 0;
  };

  bool Police(const LinkProfile& link, LinkState& state, std::size_t size) {
    const double burst = static_cast<double>(link.policerBurst);
    if (state.tokens < 0) {
      state.tokens = burst;
    } else {
      state.tokens = std::min(burst, state.tokens + static_cast<double>(m_now - state.refilled) *
                                                        link.policerRate / 1e6);
    }
    state.refilled = m_now;
    if (state.tokens < static_cast<double>(size)) return false;
    state.tokens -= static_cast<double>(size);
    return true;
  }

  bool Chance(double probability) {
    return probability > 0 && std::uniform_real_distribution<double>(0, 1)(m_random) < probability;
  }

  Microseconds NextEvent() {
    Microseconds next = m_inFlight.empty() ? kNever : m_inFlight.top().arrival;
    for (auto& host : m_hosts) {
      const Ticks expiry = host->Timers().GetNextExpiry();
      if (expiry == IManageTimerQueue::kNoExpiry) continue;
      const Microseconds at = expiry * 1000;  // 0 (due now) stays 0
      if (at < next) next = at;
    }
    return next;
  }

  void DeliverDue() {
    while (!m_inFlight.empty() && m_inFlight.top().arrival <= m_now) {
      InFlight datagram = m_inFlight.top();
      m_inFlight.pop();
      for (auto& host : m_hosts) {
        if (host->Address() != datagram.to) continue;
        const InHost in(*this, host.get());
        host->Deliver(datagram.from, datagram.bytes);
      }
    }
  }

  Microseconds m_now = kStart;
  std::uint64_t m_seed;
  std::mt19937_64 m_random;
  LinkProfile m_defaultLink;
  std::map<std::pair<Udp::endpoint, Udp::endpoint>, LinkProfile> m_links;
  std::map<std::pair<Udp::endpoint, Udp::endpoint>, LinkState> m_linkStates;
  std::map<unsigned, LinkState> m_sharedStates;  // by LinkProfile::sharedBottleneck
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<InFlight>> m_inFlight;
  std::uint64_t m_sequence = 0;
  std::vector<Posted> m_posted;
  const SimulatedHost* m_currentHost = nullptr;
  std::vector<std::unique_ptr<SimulatedHost>> m_hosts;
  std::uint64_t m_sent = 0, m_dropped = 0, m_duplicated = 0, m_corrupted = 0, m_reordered = 0;
  std::uint64_t m_queueDrops = 0, m_policed = 0;
};

// --- SimulatedHost -------------------------------------------------------------------------------

inline timerwheel::Ticks SimulatedHost::Ticks::GetTickCount() const {
  return m_network.Now() / 1000;
}

inline SimulatedHost::SimulatedHost(SimulatedNetwork& network, Udp::endpoint address,
                                    const rudp::EndpointOptions& options)
    : m_network(network), m_address(address), m_ticks(network) {
  Milliseconds granularity = 1;
  if (options.timerQueue == rudp::TimerQueueKind::Wheel) {
    TimerWheelOptions wheel;
    wheel.maximumTimeout = std::max<Milliseconds>(60'000, 2 * options.idleTimeout);
    wheel.granularity = options.timerGranularity;
    wheel.monitor = options.timerMonitor;
    granularity = options.timerGranularity;
    m_queue = std::make_unique<TimerWheel>(wheel, m_ticks);
  } else {
    TimerQueueOptions heap;
    heap.monitor = options.timerMonitor;
    m_queue = std::make_unique<TimerQueue>(heap, m_ticks);
  }
  m_engine = std::make_shared<rudp::detail::LockedEngine>(*this, *m_queue, granularity, options);
}

inline SimulatedHost::~SimulatedHost() { Shutdown(); }

inline void SimulatedHost::Shutdown() { Core().Shutdown(); }

namespace simulated_detail {
// What the engine's connect and accept completions become: public Connections, as Endpoint gives.
inline rudp::detail::EndpointCore::ConnectCompletion ToConnection(
    std::shared_ptr<rudp::detail::LockedEngine> engine, SimulatedHost::ConnectHandler handler) {
  return [engine = std::move(engine), handler = std::move(handler)](
             rudp::detail::EngineError error, std::shared_ptr<rudp::detail::ConnectionCore> state) {
    std::shared_ptr<rudp::Connection> connection;
    boost::system::error_code result = rudp::detail::ToErrorCode(error);
    if (state) {
      connection = rudp::Connection::Make(engine, state);
      if (!connection) result = boost::asio::error::no_memory;  // as the Asio endpoint does
    }
    handler(result, std::move(connection));
  };
}
}  // namespace simulated_detail

inline void SimulatedHost::Connect(const Udp::endpoint& remote, ConnectHandler handler) {
  Core().Connect(rudp::detail::ToAddress(remote),
                 simulated_detail::ToConnection(m_engine, std::move(handler)));
}

inline void SimulatedHost::Accept(ConnectHandler handler) {
  Core().Accept(simulated_detail::ToConnection(m_engine, std::move(handler)));
}

inline void SimulatedHost::Deliver(const Udp::endpoint& from,
                                   const std::vector<std::uint8_t>& datagram) {
  Core().OnDatagram(rudp::detail::ToAddress(from), datagram.data(), datagram.size());
}

inline rudp::EndpointStatistics SimulatedHost::Statistics() { return Core().Statistics(); }

inline void SimulatedHost::SendDatagram(const rudp::detail::Address& to, const std::uint8_t* data,
                                        std::size_t size) {
  m_network.Send(m_address, rudp::detail::ToUdpEndpoint(to), data, size);
}

inline Microseconds SimulatedHost::Now() const { return m_network.Now(); }

inline rudp::detail::SipHashKey SimulatedHost::SecretKey() {
  const std::uint64_t network = m_network.Seed();
  std::seed_seq seed{static_cast<std::uint32_t>(network), static_cast<std::uint32_t>(network >> 32),
                     std::uint32_t{m_address.port()}};
  std::mt19937_64 random(seed);
  return rudp::detail::SipHashKey{random(), random()};
}

inline void SimulatedHost::Post(rudp::detail::Completion& handler,
                                rudp::detail::EngineError error) {
  m_network.Post(this, handler, error);
}

}  // namespace timerwheel::test
