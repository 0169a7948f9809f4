// The model-based congestion controller (Bbr) and its delivery-rate sampler, driven by a
// deterministic model of the path in the simulated network: a bottleneck whose rate steps down and
// up, an RTT that changes, random loss and a policer. Each test states its tolerances.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/DeliveryRateSampler.h"
#include "ReliableUDP/Detail/LossRecovery.h"
#include "ReliableUDP/Support/MessageStream.h"
#include "ReliableUDP/Support/SimulatedNetwork.h"

using namespace timerwheel;
using namespace timerwheel::test;
using rudp::CongestionPhase;
using rudp::Connection;
using rudp::detail::DeliveryRateSampler;
using rudp::detail::RateSample;
using rudp::detail::SentPacket;

namespace {

constexpr Microseconds kSecond = 1'000'000;
constexpr Microseconds kMillisecond = 1'000;
constexpr std::size_t kMessageSize = 64 * 1024;

// One connection moving bulk data from a client to a server: the client keeps 8 messages queued,
// the server reads as fast as they arrive and counts the bytes.
class BulkFlow {
 public:
  BulkFlow(SimulatedNetwork& network, unsigned short serverPort, unsigned short clientPort,
           rudp::CongestionControl controller)
      : m_message(kMessageSize, 0x5a) {
    rudp::EndpointOptions client;
    client.congestionControl = controller;
    rudp::EndpointOptions server = client;
    server.acceptIncoming = true;
    m_server = &network.AddHost(serverPort, server);
    m_client = &network.AddHost(clientPort, client);
    m_server->Accept([this](boost::system::error_code ec, std::shared_ptr<Connection> c) {
      if (!ec) m_receiver = std::move(c);
    });
    m_client->Connect(m_server->Address(),
                      [this](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                        if (!ec) m_sender = std::move(c);
                      });
    connected = network.RunFor(10 * kSecond, [this] { return m_sender && m_receiver; });
  }

  // Starts sending (and receiving) for good.
  void Start() {
    for (int i = 0; i < 8; ++i) SendOne();
    ReceiveOne();
  }

  const Udp::endpoint& ClientAddress() const { return m_client->Address(); }
  const Udp::endpoint& ServerAddress() const { return m_server->Address(); }
  std::uint64_t BytesReceived() const { return m_bytesReceived; }
  rudp::ConnectionStatistics SenderStatistics() const { return m_sender->GetStatistics(); }

  bool connected = false;

 private:
  void SendOne() {
    m_sender->AsyncSend(boost::asio::buffer(m_message), [this](boost::system::error_code ec) {
      if (!ec) SendOne();
    });
  }
  void ReceiveOne() {
    m_receiver->AsyncReceive(m_incoming, [this](boost::system::error_code ec) {
      if (ec) return;
      m_bytesReceived += m_incoming.size();
      ReceiveOne();
    });
  }

  std::vector<std::uint8_t> m_message;
  std::vector<std::uint8_t> m_incoming;
  SimulatedHost* m_server = nullptr;
  SimulatedHost* m_client = nullptr;
  std::shared_ptr<Connection> m_sender;
  std::shared_ptr<Connection> m_receiver;
  std::uint64_t m_bytesReceived = 0;
};

// Application bytes per second that `flow` receives over the next `duration`.
double Goodput(SimulatedNetwork& network, const BulkFlow& flow, Microseconds duration) {
  const std::uint64_t before = flow.BytesReceived();
  network.RunFor(duration);
  return static_cast<double>(flow.BytesReceived() - before) * 1e6 / static_cast<double>(duration);
}

// A 10 ms-each-way path whose client-to-server direction has a bottleneck.
LinkProfile Bottleneck(double rate, std::size_t queueBytes) {
  LinkProfile link;
  link.delay = 10 * kMillisecond;
  link.rate = rate;
  link.queueBytes = queueBytes;
  return link;
}

constexpr double kMegabyte = 1e6;
// Datagram bytes per application byte on a full-size packet (1200-byte datagrams; the bottleneck
// counts datagram bytes, goodput application bytes): the headers and frames take under 3 %.
constexpr double kPayloadShare = 0.97;

}  // namespace

// --- DeliveryRateSampler
// --------------------------------------------------------------------------

TEST_CASE("DeliveryRateSampler measures the rate packets were delivered at",
          "[rudp][bbr][sampler]") {
  DeliveryRateSampler sampler;
  constexpr std::uint32_t kSize = 1000;
  constexpr std::size_t kRttMs = 20;
  constexpr Microseconds kStart = 1'000'000;
  // A steady flow: a packet every millisecond (1 MB/s), each acked 20 ms after it was sent. At
  // each millisecond the ACK due then arrives before the next packet leaves.
  std::vector<SentPacket> packets(100);
  std::uint64_t inFlight = 0;
  RateSample sample;
  for (std::size_t ms = 0; ms < packets.size(); ++ms) {
    const Microseconds now = kStart + ms * kMillisecond;
    if (ms >= kRttMs) {
      sampler.OnPacketAcked(packets[ms - kRttMs], now);
      inFlight -= kSize;
      sample = sampler.TakeSample(/*minRtt*/ kRttMs * kMillisecond);
    }
    packets[ms].packetNumber = ms;
    packets[ms].size = kSize;
    packets[ms].timeSent = now;
    inFlight += kSize;
    sampler.OnPacketSent(packets[ms], inFlight, now);
  }
  CHECK(packets[0].delivered == 0);
  CHECK_FALSE(packets[0].appLimited);
  CHECK(packets[50].delivered == 31 * kSize);  // packets 0-30 acked by the time it left
  // The last ACK (packet 79): the 20 packets delivered since it left, over the 20 ms since.
  CHECK(sample.delivered == 20 * kSize);
  CHECK(sample.interval == 20 * kMillisecond);
  CHECK(sample.Rate() == Approx(1e6).epsilon(0.001));
  CHECK_FALSE(sample.appLimited);
  CHECK(sampler.Delivered() == 80 * kSize);

  SECTION("an interval shorter than the minimum RTT is no sample (an ACK burst)") {
    sampler.OnPacketAcked(packets[80], kStart + 101 * kMillisecond);
    CHECK(sampler.TakeSample(/*minRtt*/ 100 * kMillisecond).Rate() == 0);
  }
  SECTION("packets sent while the application had nothing to send are marked app-limited") {
    sampler.OnApplicationLimited(inFlight);
    CHECK(sampler.AppLimited());
    SentPacket next;
    next.packetNumber = 100;
    next.size = kSize;
    next.timeSent = kStart + 100 * kMillisecond;
    sampler.OnPacketSent(next, inFlight + kSize, next.timeSent);
    CHECK(next.appLimited);
    for (std::size_t i = 80; i < packets.size(); ++i) {
      sampler.OnPacketAcked(packets[i], packets[i].timeSent + kRttMs * kMillisecond);
    }
    sampler.OnPacketAcked(next, next.timeSent + kRttMs * kMillisecond);
    CHECK(sampler.TakeSample(kMillisecond).appLimited);
    CHECK_FALSE(sampler.AppLimited());  // everything sent while limited is delivered
  }
}

// --- Bbr over a modelled path
// ---------------------------------------------------------------------

TEST_CASE(
    "Bbr fills a 20 Mbit/s bottleneck, estimates its bandwidth and RTT, and keeps the "
    "queue short",
    "[rudp][bbr][sim]") {
  constexpr double kRate = 2.5 * kMegabyte;  // 20 Mbit/s: BDP 50 KB at 20 ms
  SimulatedNetwork network(101);
  BulkFlow flow(network, 9000, 9001, rudp::CongestionControl::Bbr);
  REQUIRE(flow.connected);
  network.SetLink(flow.ClientAddress(), flow.ServerAddress(), Bottleneck(kRate, 64 * 1024));
  flow.Start();
  network.RunFor(3 * kSecond);
  const std::uint64_t sentBefore = network.Sent();
  const std::uint64_t dropsBefore = network.QueueDrops();
  const double goodput = Goodput(network, flow, 10 * kSecond);
  const auto stats = flow.SenderStatistics();
  // Tolerances: the estimate within 5 % of the link's rate (it counts datagram bytes, as the
  // link does); the RTT within 2 ms of 20 ms (a 1200-byte datagram takes 0.5 ms at this rate);
  // goodput at least 90 % of the link's rate less the headers; drops at most 1 % of datagrams.
  CHECK(static_cast<double>(stats.bandwidthEstimate) == Approx(kRate).epsilon(0.05));
  CHECK(stats.modelMinRttMicroseconds >= 20 * kMillisecond);
  CHECK(stats.modelMinRttMicroseconds <= 22 * kMillisecond);
  CHECK(goodput >= 0.90 * kPayloadShare * kRate);
  const double dropShare = static_cast<double>(network.QueueDrops() - dropsBefore) /
                           static_cast<double>(network.Sent() - sentBefore);
  CHECK(dropShare <= 0.01);
  // The queue it keeps: the smoothed RTT at most 1.5x the base RTT.
  CHECK(stats.smoothedRttMicroseconds <= 30 * kMillisecond);
  // It spent the run probing bandwidth, and at least once measured the RTT again (ProbeRTT).
  const auto phase = [&](CongestionPhase p) {
    return stats.phaseMicroseconds[static_cast<unsigned>(p)];
  };
  CHECK(phase(CongestionPhase::Startup) < kSecond);
  CHECK(phase(CongestionPhase::ProbeBwCruise) + phase(CongestionPhase::ProbeBwDown) +
            phase(CongestionPhase::ProbeBwUp) + phase(CongestionPhase::ProbeBwRefill) >=
        10 * kSecond);
  CHECK(phase(CongestionPhase::ProbeRtt) > 0);
}

TEST_CASE("Bbr's Startup ends at its own queue: no bufferbloat behind a deep queue",
          "[rudp][bbr][sim]") {
  // 50 Mbit/s, 10 ms each way (BDP 125 KB) and a 1 MB drop-tail queue: no loss ends Startup
  // here, and a queue that it grew to its window (2 BDP) would hold 20 ms. The RTT sampled every
  // 2 ms over the first 10 s, Startup included, must stay within 1.5x the base RTT at p99
  // (the queue at most half the base RTT), and the flow must still fill the link.
  constexpr double kRate = 6.25 * kMegabyte;
  SimulatedNetwork network(141);
  BulkFlow flow(network, 9000, 9001, rudp::CongestionControl::Bbr);
  REQUIRE(flow.connected);
  network.SetLink(flow.ClientAddress(), flow.ServerAddress(), Bottleneck(kRate, 1024 * 1024));
  flow.Start();
  std::vector<std::uint64_t> rtts;
  for (int i = 0; i < 5000; ++i) {
    network.RunFor(2 * kMillisecond);
    rtts.push_back(flow.SenderStatistics().latestRttMicroseconds);
  }
  std::sort(rtts.begin(), rtts.end());
  const auto stats = flow.SenderStatistics();
  CAPTURE(rudp::DescribeCongestion(stats));
  CHECK(stats.startupExitsOnDelay == 1);
  CHECK(rtts[rtts.size() * 99 / 100] <= 30 * kMillisecond);
  CHECK(static_cast<double>(flow.BytesReceived()) / 10 >= 0.90 * kPayloadShare * kRate);
  CHECK(static_cast<double>(stats.bandwidthEstimate) == Approx(kRate).epsilon(0.05));
}

TEST_CASE("Bbr follows the bottleneck's rate down and up", "[rudp][bbr][sim]") {
  SimulatedNetwork network(103);
  BulkFlow flow(network, 9000, 9001, rudp::CongestionControl::Bbr);
  REQUIRE(flow.connected);
  LinkProfile link = Bottleneck(2.5 * kMegabyte, 64 * 1024);
  network.SetLink(flow.ClientAddress(), flow.ServerAddress(), link);
  flow.Start();
  network.RunFor(5 * kSecond);
  CHECK(static_cast<double>(flow.SenderStatistics().bandwidthEstimate) ==
        Approx(2.5 * kMegabyte).epsilon(0.05));

  // Halved: the short-term bound follows within a few round trips once the queue overflows, the
  // long-term estimate within two probing cycles (under 6 s). Tolerance 10 %.
  network.Link(flow.ClientAddress(), flow.ServerAddress()).rate = 1.25 * kMegabyte;
  network.RunFor(7 * kSecond);
  CHECK(static_cast<double>(flow.SenderStatistics().bandwidthEstimate) ==
        Approx(1.25 * kMegabyte).epsilon(0.10));
  CHECK(Goodput(network, flow, 3 * kSecond) >= 0.85 * kPayloadShare * 1.25 * kMegabyte);
  CHECK(flow.SenderStatistics().smoothedRttMicroseconds <= 35 * kMillisecond);

  // Quadrupled: found by the next probe, which keeps going up while the delivery rate follows.
  network.Link(flow.ClientAddress(), flow.ServerAddress()).rate = 5 * kMegabyte;
  network.RunFor(8 * kSecond);
  CHECK(static_cast<double>(flow.SenderStatistics().bandwidthEstimate) ==
        Approx(5 * kMegabyte).epsilon(0.10));
  CHECK(Goodput(network, flow, 3 * kSecond) >= 0.85 * kPayloadShare * 5 * kMegabyte);
}

TEST_CASE("Bbr's min RTT follows a longer path within 10 s and a shorter one within a probe cycle",
          "[rudp][bbr][sim]") {
  SimulatedNetwork network(107);
  BulkFlow flow(network, 9000, 9001, rudp::CongestionControl::Bbr);
  REQUIRE(flow.connected);
  LinkProfile forward = Bottleneck(2.5 * kMegabyte, 64 * 1024);
  network.SetLink(flow.ClientAddress(), flow.ServerAddress(), forward);
  flow.Start();
  network.RunFor(4 * kSecond);
  CHECK(flow.SenderStatistics().modelMinRttMicroseconds <= 22 * kMillisecond);

  // 40 ms each way: the old minimum is kept for its 10 s window, then replaced (tolerance 10 %).
  network.Link(flow.ClientAddress(), flow.ServerAddress()).delay = 40 * kMillisecond;
  network.Link(flow.ServerAddress(), flow.ClientAddress()).delay = 40 * kMillisecond;
  network.RunFor(5 * kSecond);
  CHECK(flow.SenderStatistics().modelMinRttMicroseconds <= 22 * kMillisecond);
  network.RunFor(7 * kSecond);
  CHECK(static_cast<double>(flow.SenderStatistics().modelMinRttMicroseconds) ==
        Approx(80 * kMillisecond).epsilon(0.10));
  // The estimate survives the change, and the pipe (now 200 KB) is filled.
  CHECK(static_cast<double>(flow.SenderStatistics().bandwidthEstimate) ==
        Approx(2.5 * kMegabyte).epsilon(0.10));
  CHECK(Goodput(network, flow, 3 * kSecond) >= 0.85 * kPayloadShare * 2.5 * kMegabyte);

  // Back to 10 ms: the first lower sample replaces the minimum, long before the 10 s window
  // would. That sample comes once the queue is gone, which the phase at the change decides: a
  // queue left by a probe drains at Down's 0.9, or at Cruise's 0.99 if Down, judging by the old
  // minimum, ends at once. Over 30 network seeds the minimum came back after 30-1,610 ms
  // (median 80); tolerance 3 s, a probe cycle.
  network.Link(flow.ClientAddress(), flow.ServerAddress()).delay = 10 * kMillisecond;
  network.Link(flow.ServerAddress(), flow.ClientAddress()).delay = 10 * kMillisecond;
  network.RunFor(3 * kSecond);
  CHECK(flow.SenderStatistics().modelMinRttMicroseconds <= 22 * kMillisecond);
}

TEST_CASE("Bbr keeps its rate through random loss that NewReno collapses under",
          "[rudp][bbr][sim]") {
  const double loss = GENERATE(0.01, 0.05, 0.10);
  CAPTURE(loss);
  const auto run = [loss](rudp::CongestionControl controller, rudp::ConnectionStatistics& stats) {
    SimulatedNetwork network(109);
    BulkFlow flow(network, 9000, 9001, controller);
    REQUIRE(flow.connected);
    LinkProfile link = Bottleneck(2.5 * kMegabyte, 64 * 1024);
    link.loss = loss;  // before the bottleneck: random, not congestive
    network.SetLink(flow.ClientAddress(), flow.ServerAddress(), link);
    flow.Start();
    network.RunFor(3 * kSecond);
    const double goodput = Goodput(network, flow, 10 * kSecond);
    stats = flow.SenderStatistics();
    return goodput;
  };
  rudp::ConnectionStatistics bbr;
  rudp::ConnectionStatistics newReno;
  const double bbrGoodput = run(rudp::CongestionControl::Bbr, bbr);
  const double newRenoGoodput = run(rudp::CongestionControl::NewReno, newReno);
  CAPTURE(bbrGoodput, newRenoGoodput, bbr.congestiveLossRounds, bbr.packetsLost);
  CAPTURE(bbr.congestionWindow, bbr.bandwidthEstimate, bbr.smoothedRttMicroseconds);
  // What gets through a link that drops `loss` of the datagrams, less the headers, within 15 %;
  // and well ahead of NewReno (which halves on every loss event).
  CHECK(bbrGoodput >= 0.85 * (1 - loss) * kPayloadShare * 2.5 * kMegabyte);
  CHECK(static_cast<double>(bbr.bandwidthEstimate) >= 0.85 * (1 - loss) * 2.5 * kMegabyte);
  CHECK(bbrGoodput >= 1.5 * newRenoGoodput);
}

TEST_CASE("Bbr keeps its rate through random loss on a path whose host stalls at times",
          "[rudp][bbr][sim]") {
  // Random loss before a 50 Mbit/s bottleneck with a deep queue, on a link that holds what it is
  // given for 12 ms of every 250 ms (a relay or a sender not scheduled on a busy machine). A
  // stall lifts the mean RTT of the round it falls in, and at 5 % or 10 % loss every round loses
  // more than the draft's 2 %: judged against 2 %, such rounds are congestive, and each lowers
  // inflight_hi or the short-term bounds (this seed: 55 rounds and 77 % of the goodput below at
  // 5 %, 37 and 63 % at 10 %). Judged against the path's learned random loss, a few are (Up's
  // own queue).
  const double loss = GENERATE(0.05, 0.10);
  CAPTURE(loss);
  SimulatedNetwork network(503);
  BulkFlow flow(network, 9000, 9001, rudp::CongestionControl::Bbr);
  REQUIRE(flow.connected);
  LinkProfile link = Bottleneck(6.25 * kMegabyte, 1024 * 1024);
  link.loss = loss;
  link.stallEvery = 250 * kMillisecond;
  link.stallFor = 12 * kMillisecond;
  network.SetLink(flow.ClientAddress(), flow.ServerAddress(), link);
  flow.Start();
  network.RunFor(3 * kSecond);
  const double goodput = Goodput(network, flow, 10 * kSecond);
  const rudp::ConnectionStatistics stats = flow.SenderStatistics();
  CAPTURE(goodput, stats.congestiveLossRounds, stats.congestionWindow, stats.bandwidthEstimate);
  // Tolerances: at least 88 % of what the link delivers less the headers (over 8 seeds, 92-96 %),
  // and at most 10 congestive rounds in the 13 s (3 here; 3-4 a run over 8 seeds).
  CHECK(goodput >= 0.88 * (1 - loss) * kPayloadShare * 6.25 * kMegabyte);
  CHECK(stats.congestiveLossRounds <= 10);
}

TEST_CASE("Bbr settles at a policer's rate", "[rudp][bbr][sim]") {
  constexpr double kPolicedRate = 1.25 * kMegabyte;
  SimulatedNetwork network(113);
  BulkFlow flow(network, 9000, 9001, rudp::CongestionControl::Bbr);
  REQUIRE(flow.connected);
  // A 10 Mbit/s policer with a 32 KB bucket in front of a 40 Mbit/s link with a deep queue.
  LinkProfile link = Bottleneck(5 * kMegabyte, 1 << 20);
  link.policerRate = kPolicedRate;
  link.policerBurst = 32 * 1024;
  network.SetLink(flow.ClientAddress(), flow.ServerAddress(), link);
  flow.Start();
  network.RunFor(5 * kSecond);
  const std::uint64_t sentBefore = network.Sent();
  const std::uint64_t policedBefore = network.Policed();
  const double goodput = Goodput(network, flow, 10 * kSecond);
  const auto stats = flow.SenderStatistics();
  // The estimate within 15 % of the policed rate (the bucket lets bursts above it through);
  // goodput at least 80 % of it; what the policer drops in steady state under 10 % of datagrams
  // (the probes above the rate are what it drops).
  CHECK(static_cast<double>(stats.bandwidthEstimate) == Approx(kPolicedRate).epsilon(0.15));
  CHECK(goodput >= 0.80 * kPayloadShare * kPolicedRate);
  const double policedShare = static_cast<double>(network.Policed() - policedBefore) /
                              static_cast<double>(network.Sent() - sentBefore);
  CAPTURE(policedShare);
  CHECK(policedShare <= 0.10);
}

TEST_CASE("messages arrive exactly once in order and intact with Bbr over a lossy reordering link",
          "[rudp][bbr][sim]") {
  const double loss = GENERATE(0.0, 0.05, 0.30);
  CAPTURE(loss);
  SimulatedNetwork network(127 + static_cast<std::uint64_t>(loss * 1000));
  LinkProfile link;
  link.loss = loss;
  link.reorder = 0.05;
  link.duplicate = 0.02;
  link.delay = 10 * kMillisecond;
  link.jitter = 2 * kMillisecond;
  network.SetDefaultLink(link);
  rudp::EndpointOptions client;
  client.handshakeTimeout = 120'000;
  client.congestionControl = rudp::CongestionControl::Bbr;
  rudp::EndpointOptions server = client;
  server.acceptIncoming = true;
  SimulatedHost& serverHost = network.AddHost(9000, server);
  SimulatedHost& clientHost = network.AddHost(9001, client);
  std::shared_ptr<Connection> serverSide;
  std::shared_ptr<Connection> clientSide;
  serverHost.Accept([&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
    if (!ec) serverSide = std::move(c);
  });
  clientHost.Connect(serverHost.Address(),
                     [&](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                       if (!ec) clientSide = std::move(c);
                     });
  REQUIRE(network.RunFor(120 * kSecond, [&] { return clientSide && serverSide; }));

  const std::uint64_t count = loss >= 0.3 ? 150 : 300;
  auto up = std::make_shared<MessageStream>(clientSide, serverSide, count);
  auto down = std::make_shared<MessageStream>(serverSide, clientSide, count);
  up->Start();
  down->Start();
  REQUIRE(network.RunFor(1800 * kSecond, [&] { return up->Done() && down->Done(); }));
  CHECK(up->Error() == "");
  CHECK(down->Error() == "");
  CHECK(up->Received() == count);
  CHECK(down->Received() == count);
  const auto stats = clientSide->GetStatistics();
  // Without loss, what is declared lost was reordered past the packet threshold (by the jitter,
  // at Bbr's rate) and is nearly always found out as spurious when its late ACK comes; a few late
  // ACKs come after the record is forgotten (3 PTOs) or are themselves held back past the end.
  if (loss == 0) {
    CAPTURE(stats.packetsLost, stats.spuriousRetransmits);
    CHECK(static_cast<double>(stats.spuriousRetransmits) >=
          0.95 * static_cast<double>(stats.packetsLost));
  }
}

namespace {

struct SharingOutcome {
  double convergedAt = -1;  // s after the second flow started; -1: never
  double jain = 0;
  double linkShare = 0;   // of the link's rate less the headers
  double firstShare = 0;  // the first flow's part of what both received
};

// Two flows (Bbr unless said otherwise) through one 50 Mbit/s bottleneck, 10 ms each way (BDP
// 125 KB), with a drop-tail queue of `queueBytes` that both flows' data goes through; the second
// flow starts 3 s after the first, which by then fills the link; then 10 s of both. `ackPath` is
// the way back, which carries both receivers' ACKs.
SharingOutcome ShareBottleneck(
    unsigned seed, std::size_t queueBytes, const LinkProfile& ackPath = LinkProfile{},
    rudp::CongestionControl firstControl = rudp::CongestionControl::Bbr,
    rudp::CongestionControl secondControl = rudp::CongestionControl::Bbr) {
  constexpr double kRate = 6.25 * kMegabyte;
  SimulatedNetwork network(seed);
  BulkFlow first(network, 9000, 9001, firstControl);
  BulkFlow second(network, 9002, 9003, secondControl);
  REQUIRE(first.connected);
  REQUIRE(second.connected);
  LinkProfile link = Bottleneck(kRate, queueBytes);
  link.sharedBottleneck = 1;
  network.SetLink(first.ClientAddress(), first.ServerAddress(), link);
  network.SetLink(second.ClientAddress(), second.ServerAddress(), link);
  network.SetLink(first.ServerAddress(), first.ClientAddress(), ackPath);
  network.SetLink(second.ServerAddress(), second.ClientAddress(), ackPath);
  first.Start();
  network.RunFor(3 * kSecond);
  second.Start();
  // Bytes each flow received by every 100 ms after the second one started.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> received{{0, 0}};
  const std::uint64_t firstBefore = first.BytesReceived();
  for (int i = 0; i < 100; ++i) {
    network.RunFor(kSecond / 10);
    received.emplace_back(first.BytesReceived() - firstBefore, second.BytesReceived());
  }
  SharingOutcome outcome;
  // Converged: the first 1 s window (sliding by 100 ms) in which the smaller flow has at least
  // 0.8 of the larger's goodput (within 20 %).
  for (std::size_t end = 10; end < received.size() && outcome.convergedAt < 0; ++end) {
    const auto a = static_cast<double>(received[end].first - received[end - 10].first);
    const auto b = static_cast<double>(received[end].second - received[end - 10].second);
    if (std::min(a, b) >= 0.8 * std::max(a, b)) outcome.convergedAt = static_cast<double>(end) / 10;
  }
  // Jain's index over the 10 s, (a + b)^2 / 2 (a^2 + b^2): 1 for equal shares, 0.5 for one flow
  // taking everything.
  const auto a = static_cast<double>(received.back().first);
  const auto b = static_cast<double>(received.back().second);
  outcome.jain = (a + b) * (a + b) / (2 * (a * a + b * b));
  outcome.linkShare = (a + b) / 10 / (kPayloadShare * kRate);
  outcome.firstShare = a / (a + b);
  return outcome;
}

// Tolerances, per queue: every run's Jain index at least 0.95 with the two using 90 % of the link;
// within 20 % of each other within 5 s of the second's start in at least 11 of 12 seeds (over 60
// seeds: 59 and 60 of 60 at 64 KB and 1 MB; 35 and 36 when ProbeBW waited the draft's count of
// rounds, which this count fails). The 1 s goodputs move by 20-30 % during each flow's Up probe,
// so a run can hover at the band's edge for a while. Twelve 13 s simulated runs take about 3 s in
// release and 25 s under ASan: [slow], for its longer ctest limit.
void CheckSharing(std::size_t queueBytes, const LinkProfile& ackPath = LinkProfile{}) {
  constexpr unsigned kSeeds = 12;
  constexpr unsigned kConvergedAtLeast = 11;
  unsigned convergedIn5s = 0;
  for (unsigned seed = 131; seed < 131 + kSeeds; ++seed) {
    const SharingOutcome outcome = ShareBottleneck(seed, queueBytes, ackPath);
    CAPTURE(seed, outcome.convergedAt, outcome.jain, outcome.linkShare);
    CHECK(outcome.jain >= 0.95);
    CHECK(outcome.linkShare >= 0.90);
    if (outcome.convergedAt >= 0 && outcome.convergedAt <= 5) ++convergedIn5s;
  }
  CHECK(convergedIn5s >= kConvergedAtLeast);
}

}  // namespace

TEST_CASE("two Bbr flows through a shallow (64 KB) bottleneck queue converge to equal shares",
          "[rudp][bbr][sim][slow]") {
  // Half the BDP: the queue's overflow is a signal.
  CheckSharing(64 * 1024);
}

TEST_CASE("two Bbr flows through a deep (1 MB) bottleneck queue converge to equal shares",
          "[rudp][bbr][sim][slow]") {
  // 8 BDPs: no loss, only the queue's delay.
  CheckSharing(1024 * 1024);
}

TEST_CASE("two Bbr flows through a deep queue converge when their ACKs come back in bunches",
          "[rudp][bbr][sim][slow]") {
  // The host that sends the ACKs is not scheduled for 3 ms of every 10 (a relay thread or a
  // receiver on a busy machine): ACKs come in bunches, and the larger flow's samples keep its
  // estimate high. With one standing-queue cut per Down phase, 9 of these 12 seeds (42 of 60)
  // came within 20 % within 5 s; with a cut every few rounds of a loss-free Down, 12 (59 of 60).
  LinkProfile ackPath;
  ackPath.stallEvery = 10 * kMillisecond;
  ackPath.stallFor = 3 * kMillisecond;
  CheckSharing(1024 * 1024, ackPath);
}

TEST_CASE("a Bbr flow beside a NewReno flow through a shallow queue keeps a fair part of it",
          "[rudp][bbr][sim][slow]") {
  // NewReno fills the 64 KB queue until it overflows, and keeps it whatever Bbr does: a Bbr flow
  // that paced down on every round of standing queue would give it most of the link (29-35 %
  // left to Bbr). Tolerance: Bbr's share of the 10 s between 40 % and 2/3 (the bound on
  // taking too much), whichever flow starts first; 45-55 % in these seeds.
  for (unsigned seed = 131; seed < 135; ++seed) {
    const SharingOutcome bbrFirst =
        ShareBottleneck(seed, 64 * 1024, LinkProfile{}, rudp::CongestionControl::Bbr,
                        rudp::CongestionControl::NewReno);
    const SharingOutcome renoFirst =
        ShareBottleneck(seed, 64 * 1024, LinkProfile{}, rudp::CongestionControl::NewReno,
                        rudp::CongestionControl::Bbr);
    const double bbrJoining = 1 - renoFirst.firstShare;
    CAPTURE(seed, bbrFirst.firstShare, bbrJoining);
    CHECK(bbrFirst.firstShare >= 0.40);
    CHECK(bbrFirst.firstShare <= 2.0 / 3);
    CHECK(bbrJoining >= 0.40);
    CHECK(bbrJoining <= 2.0 / 3);
  }
}

namespace {

// When a flow's ProbeBW Up phases began: the moments (to `step`) at which its time in Up started
// to grow.
class UpProbeLog {
 public:
  void Sample(const rudp::ConnectionStatistics& stats, Microseconds now) {
    const auto up = stats.phaseMicroseconds[static_cast<unsigned>(CongestionPhase::ProbeBwUp)];
    const bool inUp = up > m_lastUp;
    if (inUp && !m_wasInUp) starts.push_back(now);
    m_wasInUp = inUp;
    m_lastUp = up;
  }
  std::vector<Microseconds> starts;

 private:
  std::uint64_t m_lastUp = 0;
  bool m_wasInUp = false;
};

}  // namespace

TEST_CASE("Bbr flows started together probe for bandwidth at moments of their own",
          "[rudp][bbr][sim]") {
  // Two flows over two identical 200 ms paths (separate bottlenecks, so neither affects the
  // other), started at the same moment. At this RTT the 2-3 s random wait, not the round count,
  // decides when ProbeBW next probes; were every flow to draw the same waits (one seed for all),
  // flows that start together, such as a server's clients after a restart, would probe in step
  // for good, each probe queueing at once what all of them add. Each connection seeds its own.
  constexpr double kRate = 2.5 * kMegabyte;  // BDP 500 KB at 200 ms: 63 rounds take 12.6 s
  SimulatedNetwork network(151);
  BulkFlow first(network, 9000, 9001, rudp::CongestionControl::Bbr);
  BulkFlow second(network, 9002, 9003, rudp::CongestionControl::Bbr);
  REQUIRE(first.connected);
  REQUIRE(second.connected);
  LinkProfile link = Bottleneck(kRate, 1024 * 1024);
  link.delay = 100 * kMillisecond;
  network.SetLink(first.ClientAddress(), first.ServerAddress(), link);
  network.SetLink(second.ClientAddress(), second.ServerAddress(), link);
  first.Start();
  second.Start();
  UpProbeLog firstUps;
  UpProbeLog secondUps;
  for (Microseconds now = 0; now < 30 * kSecond; now += 5 * kMillisecond) {
    network.RunFor(5 * kMillisecond);
    firstUps.Sample(first.SenderStatistics(), now);
    secondUps.Sample(second.SenderStatistics(), now);
  }
  // Each flow's cycles: the time from one Up to the next (the 2-3 s wait and its phases). With one
  // seed for both, the two flows entered Up within 15 ms of each other at every cycle (measured);
  // with seeds of their own, the waits differ by a uniform draw over a second. Tolerance: some
  // pair of cycles differs by 300 ms or more, with at least 5 cycles of each flow compared.
  CAPTURE(firstUps.starts, secondUps.starts);
  const std::size_t cycles = std::min(firstUps.starts.size(), secondUps.starts.size());
  REQUIRE(cycles >= 6);
  Microseconds largestDifference = 0;
  for (std::size_t k = 1; k < cycles; ++k) {
    const Microseconds a = firstUps.starts[k] - firstUps.starts[k - 1];
    const Microseconds b = secondUps.starts[k] - secondUps.starts[k - 1];
    largestDifference = std::max(largestDifference, a > b ? a - b : b - a);
  }
  CHECK(largestDifference >= 300 * kMillisecond);
}

// --- Bbr through LossRecovery, against what the peer reports
// ---------------------------------------------------------------------

namespace {

using rudp::detail::AckFrame;
using rudp::detail::AckRange;
using rudp::detail::CongestionStatistics;
using rudp::detail::IPacketFate;
using rudp::detail::LossRecovery;
using rudp::detail::LossRecoveryOptions;
using rudp::detail::PacketNumber;

struct IgnoredFate final : IPacketFate {
  void OnPacketAcked(const SentPacket&) override {}
  void OnPacketLost(const SentPacket&) override {}
};

// A Bbr sender on a 20 ms path, driven 1 ms at a time for 4 s: after 200 ms a queue of 30 ms
// stands and every tenth packet is lost, congestion by Bbr's rule (loss above 2 % with the RTT
// risen by max(min RTT / 8, 2 ms)). Each packet is acknowledged alone once its RTT has passed,
// the peer reporting `reportedAckDelay` for every ACK while it advertised 25 ms at most.
CongestionStatistics CongestedPathAsReported(Microseconds reportedAckDelay) {
  constexpr std::uint32_t kMds = 1200;
  constexpr Microseconds kBaseRtt = 20 * kMillisecond;
  LossRecoveryOptions options;
  options.maxDatagramSize = kMds;
  options.modelBased = true;
  LossRecovery recovery(options);
  recovery.SetPeerMaxAckDelay(25 * kMillisecond);
  recovery.PrepareToSend(true);
  IgnoredFate fate;
  PacketNumber pn = 0;
  Microseconds now = kSecond;
  std::vector<SentPacket> inFlight;
  std::vector<PacketNumber> due;
  for (int step = 0; step < 4000; ++step) {
    while (recovery.CanSend(kMds) && recovery.NextSendTime(now) <= now) {
      SentPacket packet;
      packet.packetNumber = pn++;
      packet.timeSent = now;
      packet.size = kMds;
      packet.ackEliciting = true;
      recovery.OnPacketSent(packet);
      inFlight.push_back(packet);
    }
    now += kMillisecond;
    const Microseconds queue = step < 200 ? 0 : 30 * kMillisecond;
    due.clear();
    inFlight.erase(std::remove_if(inFlight.begin(), inFlight.end(),
                                  [&](const SentPacket& packet) {
                                    if (packet.timeSent + kBaseRtt + queue > now) return false;
                                    if (packet.packetNumber % 10 != 7) {
                                      due.push_back(packet.packetNumber);
                                    }
                                    return true;
                                  }),
                   inFlight.end());
    for (const PacketNumber acked : due) {
      AckFrame ack;
      ack.ranges[0] = AckRange{acked, acked};
      ack.rangeCount = 1;
      ack.largest = acked;
      ack.ackDelayMicroseconds = reportedAckDelay;
      REQUIRE(recovery.OnAckReceived(ack, now, fate) == LossRecovery::AckResult::Ok);
    }
  }
  return recovery.CongestionControllerStatistics();
}

}  // namespace

// Found by review: Bbr subtracted the raw reported delay (a varint, up to 2^62 us) from each RTT
// sample, so a peer that reported 1000 s hid every queue: 0 congestive rounds where an honest
// peer's ACKs showed 62. The delay it may report is capped at the max ACK delay it advertised
// (RFC 9002 5.3), as for the RTT estimate; a 30 ms queue still shows through a 25 ms cap.
TEST_CASE("Bbr still sees congestive loss when the peer reports ACK delays beyond its maximum",
          "[rudp][bbr]") {
  const CongestionStatistics honest = CongestedPathAsReported(0);
  const CongestionStatistics inflated = CongestedPathAsReported(1000 * kSecond);
  // Tolerance: within 10 % of the honest count. Through the cap 5 ms of the 30 ms queue still
  // shows, above the 2.5 ms margin; the runs differ only in where Startup ends (its own queue
  // exit needs 10 ms, which the believed 25 ms hides).
  CHECK(honest.congestiveLossRounds >= 50);
  CHECK(inflated.congestiveLossRounds >= honest.congestiveLossRounds * 9 / 10);
  CHECK(inflated.congestiveLossRounds <= honest.congestiveLossRounds);
}
