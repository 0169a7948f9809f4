// EnetTransport: reliable, ordered ENet packets between a server host and a client host.
//
// ENet settings: both hosts are created with enet_host_create(address, 1 peer, 1 channel, 0, 0),
// i.e. no bandwidth limits (enet_host_bandwidth_limit's 0 = unlimited, so ENet's bandwidth
// throttle never runs and the reliable window is ENET_PROTOCOL_MAXIMUM_WINDOW_SIZE, 64 KB in
// transit). Everything else is ENet's default, as an application that just uses ENet gets it:
// MTU 1400, socket buffers 256 KB each way, no checksum, no compression, the packet throttle
// (starts fully open, 32/32; re-evaluated every 5 s, steps of 2), a ping every 500 ms while
// idle, and the timeouts (32 attempts, 5 s minimum, 30 s maximum) before a peer is dropped.
#include "Transport/EnetTransport.h"

#include <enet/enet.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "Transport/DeliveryTrackingTransport.h"

namespace timerwheel::perf {
namespace {

// ENet's own model is a loop that services the host with a timeout: enet_host_service sends,
// receives and waits for the socket, but cannot be woken by another thread. 1 ms bounds how long
// a packet queued by Send waits before the client thread hands it to ENet (and how long Stop
// waits), at the cost of a wake-up per millisecond when idle.
constexpr enet_uint32 kServiceTimeoutMs = 1;
// Bytes queued by Send and not yet acknowledged (still in our queue, in ENet's outgoing queue or
// in transit) before Send blocks: ENet itself accepts any amount, so without a limit a fast sender
// would just fill memory.
constexpr std::size_t kMaxPendingBytes = 256 * 1024;
constexpr enet_uint8 kChannel = 0;
constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr auto kDisconnectTimeout = std::chrono::seconds(1);

// enet_initialize once per process, before the first host; enet_deinitialize at exit.
void InitializeEnet() {
  struct Library {
    Library() {
      if (enet_initialize() != 0) throw std::runtime_error("ENet: enet_initialize failed");
    }
    ~Library() { enet_deinitialize(); }
  };
  static Library library;
}

ENetAddress Loopback(std::uint16_t port) {
  ENetAddress address{};
  enet_address_set_host_ip(&address, "127.0.0.1");
  address.port = port;
  return address;
}

class EnetTransport final : public DeliveryTrackingTransport {
 public:
  EnetTransport() { InitializeEnet(); }
  ~EnetTransport() override { Stop(); }

  std::string Name() const override { return "ENet"; }
  EnetTransport(const EnetTransport&) = delete;
  EnetTransport& operator=(const EnetTransport&) = delete;

  std::uint16_t StartServer(MessageHandler onMessage) override {
    m_onMessage = std::move(onMessage);
    // Shared with the thread: set_value may still be running when get() has returned here.
    auto started = std::make_shared<std::promise<int>>();
    std::future<int> port = started->get_future();
    m_serverThread = std::thread([this, started] { RunServer(*started); });
    const int result = port.get();
    if (result < 0) {
      m_serverThread.join();
      throw std::runtime_error("ENet: cannot create the server host");
    }
    return static_cast<std::uint16_t>(result);
  }

  void Connect(std::uint16_t port) override {
    auto connected = std::make_shared<std::promise<std::string>>();
    std::future<std::string> error = connected->get_future();
    m_clientThread = std::thread([this, port, connected] { RunClient(port, *connected); });
    const std::string message = error.get();
    if (!message.empty()) {
      m_clientThread.join();
      throw std::runtime_error("ENet: cannot connect to 127.0.0.1:" + std::to_string(port) + ": " +
                               message);
    }
    m_connected = true;
  }

  bool Send(const std::uint8_t* data, std::size_t size) override {
    if (!m_connected) return false;
    // enet_packet_create only allocates and copies (no host state), so the copy is made here, on
    // the sender's thread, as the other adapters do.
    ENetPacket* packet = enet_packet_create(data, size, ENET_PACKET_FLAG_RELIABLE);
    if (packet == nullptr) return false;
    {
      std::unique_lock<std::mutex> lock(m_mutex);
      // A message larger than the whole limit still goes, alone, once nothing is pending.
      m_changed.wait(lock, [&] {
        return m_failed || m_pendingBytes == 0 || m_pendingBytes + size <= kMaxPendingBytes;
      });
      if (!m_failed) {
        // ENet calls freeCallback when it destroys the packet: once every fragment has been
        // acknowledged, or when the peer is reset. That is when the bytes stop being pending.
        packet->userData = this;
        packet->freeCallback = &EnetTransport::OnPacketFreed;
        m_pendingBytes += size;
        ++m_messagesSent;
        m_queue.push_back(packet);
        return true;
      }
    }
    enet_packet_destroy(packet);
    return false;
  }

  TransportCounters ClientCounters() override {
    TransportCounters counters;
    counters.wireBytesSent = m_wireBytesSent.load(std::memory_order_relaxed);
    counters.packetsSent = m_packetsSent.load(std::memory_order_relaxed);
    counters.retransmissions = m_retransmissions.load(std::memory_order_relaxed);
    counters.spuriousRetransmissions = -1;  // ENet does not detect them
    return counters;
  }

  void Stop() override {
    // The client first: it disconnects gracefully while the server still services its host.
    if (m_clientThread.joinable()) {
      m_clientStop.store(true, std::memory_order_relaxed);
      m_clientThread.join();
    }
    if (m_serverThread.joinable()) {
      m_serverStop.store(true, std::memory_order_relaxed);
      m_serverThread.join();
    }
    m_connected = false;
  }

 private:
  static void OnPacketFreed(ENetPacket* packet) {
    auto* self = static_cast<EnetTransport*>(packet->userData);
    {
      std::lock_guard<std::mutex> lock(self->m_mutex);
      self->m_pendingBytes -= packet->dataLength;
    }
    self->m_changed.notify_all();
  }

  // The server thread: creates, services and destroys the server host.
  void RunServer(std::promise<int>& started) {
    const ENetAddress address = Loopback(0);
    ENetHost* host = enet_host_create(&address, 1, 1, 0, 0);
    if (host == nullptr) return started.set_value(-1);
    started.set_value(host->address.port);  // ENet reads back the port the socket was bound to
    while (!m_serverStop.load(std::memory_order_relaxed)) {
      ENetEvent event;
      std::uint64_t delivered = 0;
      // One service call (I/O, then the first event), then every event it already received.
      for (int result = enet_host_service(host, &event, kServiceTimeoutMs); result > 0;
           result = enet_host_check_events(host, &event)) {
        if (event.type == ENET_EVENT_TYPE_RECEIVE) {
          m_onMessage(event.packet->data, event.packet->dataLength);
          enet_packet_destroy(event.packet);
          ++delivered;
        }
      }
      if (delivered > 0) {
        {
          std::lock_guard<std::mutex> lock(m_mutex);
          m_messagesDelivered += delivered;
        }
        m_changed.notify_all();
      }
    }
    enet_host_destroy(host);
  }

  // The client thread: creates the client host, connects, then hands queued packets to ENet and
  // services the host until Stop, and disconnects.
  void RunClient(std::uint16_t port, std::promise<std::string>& connected) {
    ENetHost* host = enet_host_create(nullptr, 1, 1, 0, 0);
    if (host == nullptr) return connected.set_value("enet_host_create failed");
    const ENetAddress server = Loopback(port);
    ENetPeer* peer = enet_host_connect(host, &server, 1, 0);
    if (peer == nullptr) {
      enet_host_destroy(host);
      return connected.set_value("enet_host_connect failed");
    }
    const auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
    bool up = false;
    while (!up && std::chrono::steady_clock::now() < deadline) {
      ENetEvent event;
      up = enet_host_service(host, &event, kServiceTimeoutMs) > 0 &&
           event.type == ENET_EVENT_TYPE_CONNECT;
    }
    if (!up) {
      enet_peer_reset(peer);
      enet_host_destroy(host);
      return connected.set_value("timed out");
    }
    connected.set_value({});

    bool peerUp = true;
    std::vector<ENetPacket*> batch;
    while (peerUp && !m_clientStop.load(std::memory_order_relaxed)) {
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        batch.swap(m_queue);
      }
      for (ENetPacket* packet : batch) {
        // On failure (the peer is no longer connected) the packet is still ours to destroy.
        if (enet_peer_send(peer, kChannel, packet) < 0) enet_packet_destroy(packet);
      }
      batch.clear();
      ENetEvent event;
      const int result = enet_host_service(host, &event, kServiceTimeoutMs);
      if (result < 0 || (result > 0 && event.type == ENET_EVENT_TYPE_DISCONNECT)) {
        peerUp = false;
      } else if (result > 0 && event.type == ENET_EVENT_TYPE_RECEIVE) {
        enet_packet_destroy(event.packet);  // the server sends nothing; drop it if it does
      }
      UpdateCounters(host, peer);
    }
    if (!peerUp) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_failed = true;
    }
    m_changed.notify_all();

    if (peerUp) {
      // Graceful: the server sees a disconnect event. Waits for its acknowledgement briefly,
      // then drops the peer without ceremony.
      enet_peer_disconnect(peer, 0);
      const auto disconnectDeadline = std::chrono::steady_clock::now() + kDisconnectTimeout;
      while (peerUp && std::chrono::steady_clock::now() < disconnectDeadline) {
        ENetEvent event;
        const int result = enet_host_service(host, &event, kServiceTimeoutMs);
        if (result < 0 || (result > 0 && event.type == ENET_EVENT_TYPE_DISCONNECT)) {
          peerUp = false;
        } else if (result > 0 && event.type == ENET_EVENT_TYPE_RECEIVE) {
          enet_packet_destroy(event.packet);
        }
      }
      if (peerUp) enet_peer_reset(peer);
    }
    UpdateCounters(host, peer);
    {
      // Send no longer queues once m_failed is set, so this is the last of the queue.
      std::lock_guard<std::mutex> lock(m_mutex);
      m_failed = true;
      batch.swap(m_queue);
    }
    for (ENetPacket* packet : batch) enet_packet_destroy(packet);
    enet_host_destroy(host);
  }

  // Client thread, after every service call.
  void UpdateCounters(ENetHost* host, ENetPeer* peer) {
    // ENet's totals are 32-bit and its documentation asks the user to reset them before they
    // overflow: move them into 64-bit counters each time.
    m_wireBytesSent.fetch_add(host->totalSentData, std::memory_order_relaxed);
    m_packetsSent.fetch_add(host->totalSentPackets, std::memory_order_relaxed);
    host->totalSentData = 0;
    host->totalSentPackets = 0;
    // ENet counts no retransmissions as such. peer->packetsLost is incremented once for each
    // reliable command whose retransmission timeout expired, just before the command is queued
    // again: a resent message or fragment. ENet zeroes it every 10 s (the packet-loss interval,
    // when it starts a new packetLossEpoch) to compute peer->packetLoss, so the increments are
    // accumulated here; those made in the same service call as a reset are missed.
    const enet_uint32 lost = peer->packetsLost;
    const bool reset = (peer->packetLossEpoch != m_lastLossEpoch && m_lastLossEpoch != 0) ||
                       lost < m_lastPacketsLost;
    m_retransmissions.fetch_add(reset ? lost : lost - m_lastPacketsLost, std::memory_order_relaxed);
    m_lastLossEpoch = peer->packetLossEpoch;
    m_lastPacketsLost = lost;
  }

  MessageHandler m_onMessage;  // called on the server thread only
  std::thread m_serverThread;
  std::thread m_clientThread;
  std::atomic<bool> m_serverStop{false};
  std::atomic<bool> m_clientStop{false};
  bool m_connected = false;  // benchmark thread

  // Client thread only: what UpdateCounters last saw.
  enet_uint32 m_lastLossEpoch = 0;
  enet_uint32 m_lastPacketsLost = 0;
  // Written by the client thread, read by ClientCounters at any time.
  std::atomic<std::uint64_t> m_wireBytesSent{0};
  std::atomic<std::uint64_t> m_packetsSent{0};
  std::atomic<std::uint64_t> m_retransmissions{0};

  // Shared between the benchmark's thread and both ENet threads, under m_mutex; m_changed is
  // also notified when bytes are acknowledged.
  std::vector<ENetPacket*> m_queue;  // created by Send, not yet given to enet_peer_send
  std::size_t m_pendingBytes = 0;    // m_queue plus what ENet holds unacknowledged
};

}  // namespace

std::unique_ptr<ITransportUnderTest> MakeEnetTransport() {
  return std::make_unique<EnetTransport>();
}

}  // namespace timerwheel::perf
