// The batched socket path (UdpSocket/DatagramBatch, and the Endpoint over it) against one
// datagram per system call, over real loopback sockets: the same datagrams, bytes and order; the
// fallback when the kernel refuses segmentation or receive offload. Waits are on futures and on
// the socket's readiness with generous timeouts; nothing is timed.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Support/ConnectEndpoints.h"
#include "ReliableUDP/Support/MessageStream.h"
#include "Support/IoThreads.h"
#include "UdpSocket/DatagramBatch.h"

using namespace timerwheel;
using namespace timerwheel::test;
using Udp = boost::asio::ip::udp;

namespace {

const Udp::endpoint kAnyLoopback(boost::asio::ip::make_address_v4("127.0.0.1"), 0);
constexpr std::size_t kMaxDatagram = 1200;

struct Datagram {
  Udp::endpoint from;
  std::vector<std::uint8_t> bytes;
  bool operator==(const Datagram& other) const {
    return from == other.from && bytes == other.bytes;
  }
};

Udp::socket OpenSocket(boost::asio::io_context& io) {
  Udp::socket socket(io, kAnyLoopback);
  socket.non_blocking(true);
  boost::system::error_code ignored;
  socket.set_option(Udp::socket::receive_buffer_size(4 << 20), ignored);
  return socket;
}

// Datagram i of a test run: runs of full-size datagrams to one destination with a shorter one
// ending some runs (what GSO can carry as one message), then a change of destination.
std::vector<std::uint8_t> Bytes(std::size_t i) {
  const std::size_t size = (i % 7 == 6) ? 1 + (i * 37) % kMaxDatagram : kMaxDatagram;
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t b = 0; b < size; ++b) bytes[b] = static_cast<std::uint8_t>(i * 131 + b);
  return bytes;
}

// Reads everything the batch's sockets hold until `expected` datagrams have arrived.
std::vector<Datagram> ReceiveAll(Udp::socket& socket, udp::ReceiveBatch& batch,
                                 std::size_t expected) {
  std::vector<Datagram> received;
  while (received.size() < expected) {
    boost::system::error_code error;
    if (batch.Receive(socket, error) == 0) {
      REQUIRE((error == boost::asio::error::would_block || error == boost::asio::error::try_again));
      socket.wait(Udp::socket::wait_read);  // loopback delivers within the send: it is there
      continue;
    }
    batch.ForEachDatagram(
        [&](const Udp::endpoint& from, const std::uint8_t* data, std::size_t size) {
          received.push_back({from, std::vector<std::uint8_t>(data, data + size)});
        });
  }
  return received;
}

}  // namespace

TEST_CASE("a send batch reaches two peers with every datagram's bytes, in order",
          "[.][realtime][rudp][batched]") {
  const bool segmentation = GENERATE(false, true);
  const bool receiveOffload = GENERATE(false, true);
  const bool kernelRefusesSegmentation = segmentation && GENERATE(false, true);
  CAPTURE(segmentation, receiveOffload, kernelRefusesSegmentation);
  boost::asio::io_context io;
  Udp::socket sender = OpenSocket(io);
  Udp::socket first = OpenSocket(io);
  Udp::socket second = OpenSocket(io);
  udp::SendBatch batch(64, kMaxDatagram, segmentation);
  udp::ReceiveBatch firstBatch(8), secondBatch(8);
  if (receiveOffload) {
    firstBatch.EnableReceiveOffload(first);
    secondBatch.EnableReceiveOffload(second);
  }
  if (kernelRefusesSegmentation) batch.RefuseNextSegmentedSendForTesting();

  std::vector<Datagram> toFirst, toSecond;
  const Udp::endpoint from = sender.local_endpoint();
  for (std::size_t i = 0; i < 60; ++i) {
    const bool second_ = (i / 20) % 2 == 1;  // 20 to the first, 20 to the second, 20 to the first
    const Udp::endpoint to = second_ ? second.local_endpoint() : first.local_endpoint();
    const std::vector<std::uint8_t> bytes = Bytes(i);
    batch.Add(to, bytes.data(), bytes.size());
    (second_ ? toSecond : toFirst).push_back({from, bytes});
  }
  const udp::SendBatch::FlushResult result = batch.Flush(sender);
  CHECK(result.sent == 60);
  CHECK(result.failed == 0);
  CHECK_FALSE(result.wouldBlock);
  CHECK(batch.Empty());

  CHECK(ReceiveAll(first, firstBatch, toFirst.size()) == toFirst);
  CHECK(ReceiveAll(second, secondBatch, toSecond.size()) == toSecond);

  const udp::BatchCounters& counters = batch.Counters();
  if (!udp::BatchedSystemCallsAvailable()) {
    CHECK(counters.sendCalls == 60);  // one datagram per call, whatever was asked
  } else if (kernelRefusesSegmentation) {
    CHECK(counters.offloadRefusals == 1);
    CHECK_FALSE(batch.SegmentationOffload());
    CHECK(counters.segmentedMessages == 0);
  } else if (segmentation) {
    // Either the kernel segments (Linux 4.18 and later) or it refused once and batching went on.
    CHECK((counters.segmentedMessages > 0 || counters.offloadRefusals == 1));
    CHECK(counters.sendCalls <= 2);
  } else {
    CHECK(counters.sendCalls == 1);  // 60 messages fit one sendmmsg
    CHECK(counters.segmentedMessages == 0);
  }
}

TEST_CASE("a kernel that refuses receive offload leaves one datagram per message",
          "[.][realtime][rudp][batched]") {
  boost::asio::io_context io;
  Udp::socket sender = OpenSocket(io);
  Udp::socket receiver = OpenSocket(io);
  udp::ReceiveBatch receive(8);
  receive.RefuseNextReceiveOffloadForTesting();
  CHECK_FALSE(receive.EnableReceiveOffload(receiver));
  CHECK(receive.Counters().offloadRefusals == (udp::BatchedSystemCallsAvailable() ? 1u : 0u));
  udp::SendBatch batch(64, kMaxDatagram, true);
  std::vector<Datagram> sent;
  for (std::size_t i = 0; i < 30; ++i) {
    const std::vector<std::uint8_t> bytes(kMaxDatagram, static_cast<std::uint8_t>(i));
    batch.Add(receiver.local_endpoint(), bytes.data(), bytes.size());
    sent.push_back({sender.local_endpoint(), bytes});
  }
  CHECK(batch.Flush(sender).sent == 30);
  CHECK(ReceiveAll(receiver, receive, sent.size()) == sent);
  CHECK(receive.Counters().coalescedMessages == 0);
}

TEST_CASE("a send batch refuses a datagram over its maximum and changes nothing",
          "[rudp][batched]") {
  udp::SendBatch batch(2, 100, true);
  const std::vector<std::uint8_t> big(101), small(100);
  CHECK_THROWS_AS(batch.Add(kAnyLoopback, big.data(), big.size()), std::length_error);
  CHECK(batch.Empty());
  batch.Add(kAnyLoopback, small.data(), small.size());
  batch.Add(kAnyLoopback, small.data(), small.size());
  CHECK(batch.Full());
  CHECK_THROWS_AS(batch.Add(kAnyLoopback, small.data(), small.size()), std::length_error);
  CHECK(batch.Pending() == 2);
}

TEST_CASE("the batched and the one-per-call endpoint deliver the same messages, bytes and counts",
          "[.][realtime][rudp][batched][loopback]") {
  struct Outcome {
    std::uint64_t received = 0;
    rudp::ConnectionStatistics sender, receiver;
    rudp::EndpointStatistics client, server;
  };
  auto run = [](rudp::EndpointOptions options) {
    IoThreads io(1);
    rudp::EndpointOptions serverOptions = options;
    serverOptions.acceptIncoming = true;
    rudp::Endpoint server(io.Io(), kAnyLoopback, serverOptions);
    rudp::Endpoint client(io.Io(), kAnyLoopback, options);
    auto [clientSide, serverSide] =
        ConnectEndpoints(client, server, server.LocalEndpoint(), std::chrono::seconds(60));
    REQUIRE(clientSide);
    REQUIRE(serverSide);
    // Sizes from 1 byte to several datagrams, so that runs of full datagrams (GSO) and short
    // ones alternate; the receiver checks each message's index, size and bytes.
    auto stream = std::make_shared<MessageStream>(
        clientSide, serverSide, 3000, [](std::uint64_t i) { return 1 + (i * 7919) % 9000; }, 16);
    stream->Start();
    REQUIRE(stream->WaitFinished(std::chrono::seconds(120)));
    CHECK(stream->Error() == "");
    Outcome outcome;
    outcome.received = stream->Received();
    outcome.sender = clientSide->GetStatistics();
    outcome.receiver = serverSide->GetStatistics();
    outcome.client = client.GetStatistics();
    outcome.server = server.GetStatistics();
    return outcome;
  };
  rudp::EndpointOptions unbatched;
  unbatched.batchedIo = false;
  const Outcome one = run(unbatched);
  const Outcome batched = run(rudp::EndpointOptions{});

  CHECK(one.received == 3000);
  CHECK(batched.received == 3000);
  // What the application sent and got is the same, message for message (checked as they
  // arrived) and in the counts; packetisation depends on timing, so packet counts are not.
  CHECK(batched.sender.messagesSent == one.sender.messagesSent);
  CHECK(batched.receiver.messagesReceived == one.receiver.messagesReceived);
  CHECK(batched.sender.streamBytesSent == one.sender.streamBytesSent);
  // Every datagram went through the engine's counters on both paths.
  for (const Outcome* outcome : {&one, &batched}) {
    CHECK(outcome->client.datagramsSent >= outcome->sender.packetsSent);
    CHECK(outcome->server.datagramsReceived >= outcome->receiver.packetsReceived);
    CHECK(outcome->client.sendErrors == 0);
  }
  // One system call per datagram, or fewer.
  CHECK(one.client.sendSystemCalls >= one.client.datagramsSent);
  CHECK(one.client.segmentedSends == 0);
  if (udp::BatchedSystemCallsAvailable()) {
    CHECK(batched.client.sendSystemCalls < batched.client.datagramsSent);
    CHECK(batched.server.receiveSystemCalls <= batched.server.datagramsReceived);
  }
}
