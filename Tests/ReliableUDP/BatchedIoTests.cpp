// The batched socket path (UdpSocket/DatagramBatch, and the Endpoint over it) against one datagram
// per system call, over real loopback sockets: the same datagrams, bytes and order; the fallback
// when the kernel refuses segmentation or receive offload; the readable wait (UdpSocket/
// ReadableWait) wakes for every datagram and makes no epoll_ctl. Waits are on futures and on the
// socket's readiness with generous timeouts; nothing is timed.
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "ReliableUDP/Endpoint.h"
#include "ReliableUDP/Support/ConnectEndpoints.h"
#include "ReliableUDP/Support/MessageStream.h"
#include "ReliableUDP/Support/RawSocketPeer.h"
#include "Support/IoThreads.h"
#include "UdpSocket/DatagramBatch.h"
#include "UdpSocket/ReadableWait.h"

#ifdef __linux__
#include <dlfcn.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#endif

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

// Whether the socket becomes readable within 10 s. Loopback delivers within the send, so a datagram
// a test waits for is there at once or was lost: the limit only turns a loss (the defect a test
// guards against) into a failure instead of a hang; a busy machine does not come near it.
bool WaitReadable(Udp::socket& socket) {
  auto& io = static_cast<boost::asio::io_context&>(socket.get_executor().context());
  bool readable = false;
  socket.async_wait(Udp::socket::wait_read,
                    [&](const boost::system::error_code& error) { readable = !error; });
  io.restart();
  io.run_for(std::chrono::seconds(10));
  if (!readable) {
    socket.cancel();  // and let the cancelled wait complete before its handler's locals go
    io.restart();
    io.run();
  }
  return readable;
}

// Reads everything the batch's sockets hold until `expected` datagrams have arrived.
std::vector<Datagram> ReceiveAll(Udp::socket& socket, udp::ReceiveBatch& batch,
                                 std::size_t expected) {
  std::vector<Datagram> received;
  while (received.size() < expected) {
    boost::system::error_code error;
    if (batch.Receive(socket, error) == 0) {
      REQUIRE((error == boost::asio::error::would_block || error == boost::asio::error::try_again));
      INFO(received.size() << " of " << expected << " datagrams received");
      REQUIRE(WaitReadable(socket));
      continue;
    }
    batch.ForEachDatagram(
        [&](const Udp::endpoint& from, const std::uint8_t* data, std::size_t size) {
          received.push_back({from, std::vector<std::uint8_t>(data, data + size)});
        });
  }
  return received;
}

// Datagram i of a run: `size` bytes that say which datagram they are.
std::vector<std::uint8_t> Numbered(std::size_t i, std::size_t size) {
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t b = 0; b < size; ++b) bytes[b] = static_cast<std::uint8_t>(i * 7 + b);
  return bytes;
}

#ifdef __linux__
// Whether this kernel segments a run sent to loopback (Linux 4.18 and later, UDP_SEGMENT).
bool KernelSegments(boost::asio::io_context& io) {
  Udp::socket sender = OpenSocket(io);
  Udp::socket sink = OpenSocket(io);
  udp::SendBatch probe(2, kMaxDatagram, true);
  const std::vector<std::uint8_t> bytes(kMaxDatagram);
  probe.Add(sink.local_endpoint(), bytes.data(), bytes.size());
  probe.Add(sink.local_endpoint(), bytes.data(), bytes.size());
  probe.Flush(sender);
  return probe.Counters().segmentedMessages == 1;
}

// Runs `body` in a child process (fork: call it while this process runs no other thread) and
// returns what it printed on its standard output, "" if it did not end within a minute.
std::string OutputOfChild(const std::function<void()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);  // or the child would print what this process had buffered
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    // Every path ends here, a throw included: unwound into the child's copy of Catch2, it would
    // run the rest of the suite in the child, into the pipe.
    try {
      body();
    } catch (const std::exception& error) {
      std::printf("child threw: %s", error.what());
    } catch (...) {
      std::printf("child threw");
    }
    std::fflush(stdout);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string output;
  for (;;) {
    pollfd readable{fds[0], POLLIN, 0};
    if (::poll(&readable, 1, 60'000) <= 0) {
      ::kill(pid, SIGKILL);
      output.clear();
      break;
    }
    char buffer[256];
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return output;
}

// From here on this thread's setsockopt(SOL_UDP, UDP_GRO) fails with ENOPROTOOPT, as on a kernel
// without receive offload (seccomp; for a child process only: it cannot be undone).
bool RefuseReceiveOffloadInThisProcess() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setsockopt, 0, 5),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_UDP, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, UDP_GRO, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOPROTOOPT),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  const sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}
#endif

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

#ifdef __linux__
TEST_CASE("a segmented run the kernel fails goes out unsegmented, and only a refusal turns GSO off",
          "[.][realtime][rudp][batched]") {
  // The error the kernel gives the run's segmented send, and whether the same datagrams sent
  // one by one make it a refusal of segmentation. EMSGSIZE: the segment size is over the path's
  // MTU (Linux 6.13 and 6.1.129 on; before, EINVAL): only that run, and that peer's, go
  // unsegmented. ENOBUFS: a transient error of that one message.
  const auto [error, refusal] = GENERATE(table<int, bool>(
      {{EMSGSIZE, false}, {ENOBUFS, false}, {EIO, true}, {EINVAL, true}, {ENOPROTOOPT, true}}));
  CAPTURE(error, refusal);
  boost::asio::io_context io;
  if (!KernelSegments(io)) {
    WARN("this kernel does not segment: nothing to test");
    return;
  }
  Udp::socket sender = OpenSocket(io);
  Udp::socket first = OpenSocket(io);
  Udp::socket second = OpenSocket(io);
  udp::SendBatch batch(64, kMaxDatagram, true);
  udp::ReceiveBatch firstBatch(8), secondBatch(8);
  std::vector<Datagram> toFirst, toSecond;
  std::size_t next = 0;
  const auto addRuns = [&] {  // a run of 10 to the first peer, then one of 10 to the second
    for (int i = 0; i < 20; ++i, ++next) {
      const bool second_ = i >= 10;
      const std::vector<std::uint8_t> bytes = Numbered(next, kMaxDatagram);
      batch.Add(second_ ? second.local_endpoint() : first.local_endpoint(), bytes.data(),
                bytes.size());
      (second_ ? toSecond : toFirst).push_back({sender.local_endpoint(), bytes});
    }
  };

  addRuns();
  batch.FailNextSegmentedSendForTesting(error);
  const udp::SendBatch::FlushResult result = batch.Flush(sender);
  CHECK(result.sent == 20);
  CHECK(result.failed == 0);
  CHECK(ReceiveAll(first, firstBatch, 10) == toFirst);
  CHECK(ReceiveAll(second, secondBatch, 10) == toSecond);
  const udp::BatchCounters& counters = batch.Counters();
  CHECK(counters.offloadRefusals == (refusal ? 1u : 0u));
  CHECK(batch.SegmentationOffload() == !refusal);
  CHECK(counters.segmentedMessages == (refusal ? 0u : 1u));  // the second peer's run

  // Again, with no error injected: after EMSGSIZE the first peer's runs of that size go
  // unsegmented (remembered), the second's segmented.
  toFirst.clear();
  toSecond.clear();
  addRuns();
  CHECK(batch.Flush(sender).sent == 20);
  CHECK(ReceiveAll(first, firstBatch, 10) == toFirst);
  CHECK(ReceiveAll(second, secondBatch, 10) == toSecond);
  CHECK(counters.offloadRefusals == (refusal ? 1u : 0u));
  CHECK(counters.segmentedMessages == (refusal ? 0u : error == EMSGSIZE ? 2u : 3u));
}
#endif

TEST_CASE("datagrams to port 0 fail alone and leave segmentation on",
          "[.][realtime][rudp][batched]") {
  // What the engine sends when it answers two Hellos spoofed from port 0: a run of two to an
  // address the kernel refuses (EINVAL on Linux) before it looks at the segmentation.
  boost::asio::io_context io;
  Udp::socket sender = OpenSocket(io);
  Udp::socket receiver = OpenSocket(io);
  udp::SendBatch batch(64, kMaxDatagram, true);
  const Udp::endpoint portZero(kAnyLoopback.address(), 0);
  const std::vector<std::uint8_t> cookie = Numbered(0, 37);
  batch.Add(portZero, cookie.data(), cookie.size());
  batch.Add(portZero, cookie.data(), cookie.size());
  const udp::SendBatch::FlushResult result = batch.Flush(sender);
  CHECK(result.failed == 2);
  CHECK(result.sent == 0);
  CHECK(batch.Empty());
  CHECK(batch.Counters().offloadRefusals == 0);
  CHECK(batch.SegmentationOffload() == udp::BatchedSystemCallsAvailable());

  // The next run to a real peer is still segmented (where the kernel can).
  std::vector<Datagram> sent;
  for (std::size_t i = 0; i < 10; ++i) {
    const std::vector<std::uint8_t> bytes = Numbered(i, kMaxDatagram);
    batch.Add(receiver.local_endpoint(), bytes.data(), bytes.size());
    sent.push_back({sender.local_endpoint(), bytes});
  }
  CHECK(batch.Flush(sender).sent == 10);
  udp::ReceiveBatch receive(8);
  CHECK(ReceiveAll(receiver, receive, sent.size()) == sent);
  if (udp::BatchedSystemCallsAvailable()) {
    CHECK((batch.Counters().segmentedMessages == 1 || batch.Counters().offloadRefusals == 1));
  }
}

#ifdef __linux__
TEST_CASE("a datagram cut short by the receive buffer is dropped and counted, never handed on",
          "[.][realtime][rudp][batched]") {
  // The buffers are 64 KiB, which every UDP datagram fits but a GRO buffer may not (where
  // gro_max_size was raised); the hook offers the kernel 1,000 bytes of each instead.
  boost::asio::io_context io;
  Udp::socket sender = OpenSocket(io);
  Udp::socket receiver = OpenSocket(io);
  udp::ReceiveBatch receive(8);
  receive.LimitMessageSizeForTesting(1000);
  std::vector<Datagram> expected;
  for (const std::size_t size : std::initializer_list<std::size_t>{100, 2000, 1000, 1001, 0, 300}) {
    const std::vector<std::uint8_t> bytes = Numbered(size, size);
    sender.send_to(boost::asio::buffer(bytes), receiver.local_endpoint());
    if (size <= 1000) expected.push_back({sender.local_endpoint(), bytes});
  }
  CHECK(ReceiveAll(receiver, receive, expected.size()) == expected);
  CHECK(receive.Counters().truncatedDatagrams == 2);
}

TEST_CASE("a coalesced buffer cut short hands on its whole datagrams and counts the rest",
          "[.][realtime][rudp][batched]") {
  boost::asio::io_context io;
  Udp::socket sender = OpenSocket(io);
  Udp::socket receiver = OpenSocket(io);
  udp::ReceiveBatch receive(8);
  if (!receive.EnableReceiveOffload(receiver) || !KernelSegments(io)) {
    WARN("this kernel does not coalesce: nothing to test");
    return;
  }
  receive.LimitMessageSizeForTesting(4500);
  udp::SendBatch batch(64, kMaxDatagram, true);
  std::vector<Datagram> sent;
  for (std::size_t i = 0; i < 10; ++i) {  // one segmented send of 10 x 1,000 bytes
    sent.push_back({sender.local_endpoint(), Numbered(i, 1000)});
    batch.Add(receiver.local_endpoint(), sent.back().bytes.data(), 1000);
  }
  REQUIRE(batch.Flush(sender).sent == 10);
  REQUIRE(batch.Counters().segmentedMessages == 1);
  const std::vector<std::uint8_t> after = Numbered(99, 200);
  sender.send_to(boost::asio::buffer(after), receiver.local_endpoint());
  const std::vector<Datagram> received = ReceiveAll(receiver, receive, 5);
  if (receive.Counters().coalescedMessages == 0) {  // delivered one by one: none was cut
    CHECK(received == std::vector<Datagram>(sent.begin(), sent.begin() + 5));
    return;
  }
  // 4,500 of the 10,000 bytes fit: the first four datagrams whole, the other six lost.
  std::vector<Datagram> expected(sent.begin(), sent.begin() + 4);
  expected.push_back({sender.local_endpoint(), after});
  CHECK(received == expected);
  CHECK(receive.Counters().truncatedDatagrams == 6);
}

TEST_CASE("a kernel's refusal of receive offload counts once per socket, however many shards",
          "[.][realtime][rudp][batched]") {
  // In a child process whose setsockopt(UDP_GRO) the kernel refuses (seccomp): each shard has a
  // receiver reading the one socket, and the socket was refused once.
  const std::string output = OutputOfChild([] {
    if (!RefuseReceiveOffloadInThisProcess()) {
      std::printf("no seccomp");
      return;
    }
    std::uint64_t refusals = 0;
    {
      IoThreads io(1);
      rudp::EndpointOptions options;
      options.shards = 4;
      rudp::Endpoint endpoint(io.Io(), kAnyLoopback, options);
      refusals = endpoint.GetStatistics().offloadRefusals;
      endpoint.Close();
    }
    std::printf("offloadRefusals %llu", static_cast<unsigned long long>(refusals));
  });
  if (output == "no seccomp") {
    WARN("seccomp is not available here: nothing to test");
    return;
  }
  CHECK(output == "offloadRefusals 1");
}
#endif

#if TIMERWHEEL_READABLE_WAIT_WITHOUT_REARM
namespace {

// What a ReadableWait's callback saw: how often it ran, and its last error.
struct WaitOutcome {
  int calls = 0;
  boost::system::error_code error;
};
void RecordOutcome(void* context, const boost::system::error_code& error) {
  auto& outcome = *static_cast<WaitOutcome*>(context);
  ++outcome.calls;
  outcome.error = error;
}

// Reads the socket until it has nothing left; returns how many datagrams it held.
std::size_t Drain(Udp::socket& socket) {
  std::size_t datagrams = 0;
  std::array<std::uint8_t, 2048> buffer{};
  for (;;) {
    Udp::endpoint from;
    boost::system::error_code error;
    socket.receive_from(boost::asio::buffer(buffer), from, 0, error);
    if (error) return datagrams;
    ++datagrams;
  }
}

// Runs ready handlers until `outcome` has a call, for at most 10 s (a datagram on loopback is
// there within its send: the limit turns a missed wake-up into a failure instead of a hang).
void RunUntilCalled(boost::asio::io_context& io, const WaitOutcome& outcome) {
  io.restart();
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (outcome.calls == 0 && std::chrono::steady_clock::now() < limit) {
    io.run_one_until(limit);
  }
}

void SendByte(Udp::socket& sender, const Udp::socket& to) {
  const std::uint8_t byte = 7;
  sender.send_to(boost::asio::buffer(&byte, 1), to.local_endpoint());
}

// A freshly registered socket counts as maybe readable, so its first wait completes at once; this
// completes that one, then one woken by a datagram, and drains the socket.
void CompleteFirstWait(boost::asio::io_context& io, Udp::socket& socket, Udp::socket& sender,
                       udp::ReadableWait& wait) {
  WaitOutcome first;
  wait.Start(nullptr, &RecordOutcome, &first);
  io.restart();
  io.poll();
  REQUIRE(first.calls == 1);
  WaitOutcome second;
  wait.Start(nullptr, &RecordOutcome, &second);
  SendByte(sender, socket);
  RunUntilCalled(io, second);
  REQUIRE(second.calls == 1);
  REQUIRE(Drain(socket) == 1);
}

// A socket, a sender to it and a wait of the socket that has completed once, drained since.
struct DrainedSocket {
  explicit DrainedSocket(boost::asio::io_context& io)
      : socket(OpenSocket(io)), sender(OpenSocket(io)), wait(socket) {
    CompleteFirstWait(io, socket, sender, wait);
  }
  void Send() { SendByte(sender, socket); }
  Udp::socket socket;
  Udp::socket sender;
  udp::ReadableWait wait;
};

}  // namespace

TEST_CASE("a readable wait after a draining read parks until a datagram arrives",
          "[.][realtime][rudp][batched]") {
  boost::asio::io_context io;
  DrainedSocket drained(io);
  WaitOutcome outcome;
  drained.wait.Start(nullptr, &RecordOutcome, &outcome);
  io.restart();
  io.poll();  // the reactor looks at the socket: nothing to read, nothing runs
  CHECK(outcome.calls == 0);
  drained.Send();
  RunUntilCalled(io, outcome);
  CHECK(outcome.calls == 1);
  CHECK(!outcome.error);
  CHECK(Drain(drained.socket) == 1);
  io.restart();
  io.poll();
  CHECK(outcome.calls == 1);  // once per Start
}

TEST_CASE("a datagram that came before the readable wait started wakes it",
          "[.][realtime][rudp][batched]") {
  boost::asio::io_context io;
  DrainedSocket drained(io);
  // The datagram's edge taken by the reactor while no wait was in flight, or not yet taken.
  const bool reactorSawIt = GENERATE(true, false);
  drained.Send();
  if (reactorSawIt) {
    io.restart();
    io.poll();
  }
  WaitOutcome outcome;
  drained.wait.Start(nullptr, &RecordOutcome, &outcome);
  RunUntilCalled(io, outcome);
  CHECK(outcome.calls == 1);
  CHECK(Drain(drained.socket) == 1);
}

TEST_CASE(
    "a readable wait ends with operation_aborted when its socket closes, and holds its "
    "keep-alive only until then",
    "[.][realtime][rudp][batched]") {
  boost::asio::io_context io;
  DrainedSocket drained(io);
  auto owner = std::make_shared<int>(1);
  const std::weak_ptr<int> watch = owner;
  WaitOutcome outcome;
  drained.wait.Start(std::move(owner), &RecordOutcome, &outcome);
  CHECK(!watch.expired());
  const bool close = GENERATE(true, false);
  if (close) {
    drained.socket.close();
  } else {
    drained.socket.cancel();
  }
  RunUntilCalled(io, outcome);
  CHECK(outcome.calls == 1);
  CHECK(outcome.error == boost::asio::error::operation_aborted);
  CHECK(watch.expired());
}

TEST_CASE("a readable wait the io_context drops unrun releases its keep-alive without a call",
          "[.][realtime][rudp][batched]") {
  WaitOutcome outcome;
  std::weak_ptr<int> watch;
  std::optional<udp::ReadableWait> wait;  // outlives the io_context, which drops its operation
  {
    boost::asio::io_context io;
    Udp::socket socket = OpenSocket(io);
    Udp::socket sender = OpenSocket(io);
    wait.emplace(socket);
    CompleteFirstWait(io, socket, sender, *wait);
    auto owner = std::make_shared<int>(1);
    watch = owner;
    wait->Start(std::move(owner), &RecordOutcome, &outcome);
    io.restart();
    io.poll();
    CHECK(!watch.expired());
    // The sockets close first (the wait is cancelled: queued to complete, never run), then the
    // io_context is destroyed with it queued.
  }
  CHECK(outcome.calls == 0);
  CHECK(watch.expired());
}

TEST_CASE("a second readable wait while one is in flight is refused and changes nothing",
          "[.][realtime][rudp][batched]") {
  boost::asio::io_context io;
  DrainedSocket drained(io);
  WaitOutcome outcome;
  WaitOutcome second;
  drained.wait.Start(nullptr, &RecordOutcome, &outcome);
  CHECK_THROWS_AS(drained.wait.Start(nullptr, &RecordOutcome, &second), std::logic_error);
  drained.Send();
  RunUntilCalled(io, outcome);
  io.restart();
  io.poll();
  CHECK(outcome.calls == 1);
  CHECK(second.calls == 0);
}

namespace {

// In a child process killed by the kernel at its first epoll_ctl once its sockets are registered
// (seccomp): 100 waits, each woken by a datagram, by a ReadableWait or by Asio's async_wait.
// Prints how many woke, unless killed (then nothing).
std::string WakeWithoutEpollCtl(bool asioWait) {
  return OutputOfChild([asioWait] {
    boost::asio::io_context io;
    DrainedSocket drained(io);
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_epoll_ctl, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    const sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      std::printf("no seccomp");
      std::fflush(stdout);
      return;
    }
    int woken = 0;
    for (int i = 0; i < 100; ++i) {
      WaitOutcome outcome;
      if (asioWait) {
        drained.socket.async_wait(
            Udp::socket::wait_read,
            [&](const boost::system::error_code& error) { RecordOutcome(&outcome, error); });
      } else {
        drained.wait.Start(nullptr, &RecordOutcome, &outcome);
      }
      drained.Send();
      RunUntilCalled(io, outcome);
      if (outcome.calls == 1 && !outcome.error && Drain(drained.socket) == 1) ++woken;
    }
    std::printf("woken %d", woken);
    std::fflush(stdout);  // closing the sockets makes an epoll_ctl (and ends the child)
  });
}

}  // namespace

TEST_CASE("readable waits make no epoll_ctl, where Asio's async_wait makes one each",
          "[.][realtime][rudp][batched]") {
  const std::string output = WakeWithoutEpollCtl(false);
  if (output == "no seccomp") {
    WARN("seccomp is not available here: nothing to test");
    return;
  }
  CHECK(output == "woken 100");
  // The filter bites: Asio's wait re-arms the socket, and the kernel ends the child at once.
  CHECK(WakeWithoutEpollCtl(true) == "");
}
namespace {
// The next recvmmsg that finds a datagram queued fails with this error instead (0: none), leaving
// the datagram queued, as a receive the kernel refused (a security module's EACCES, ENOMEM).
std::atomic<int> g_failNextReadableRecvmmsg{0};
}  // namespace

// The test binary's own recvmmsg: the endpoint's code linked into it calls this one, which calls
// the C library's unless a failure is due.
extern "C" int recvmmsg(int fd, struct mmsghdr* messages, unsigned int count, int flags,
                        struct timespec* timeout) {
  using Real = int (*)(int, struct mmsghdr*, unsigned int, int, struct timespec*);
  static const Real real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "recvmmsg"));
  if (g_failNextReadableRecvmmsg.load() != 0) {
    pollfd readable{fd, POLLIN, 0};
    if (::poll(&readable, 1, 0) == 1 && (readable.revents & POLLIN) != 0) {
      if (const int error = g_failNextReadableRecvmmsg.exchange(0)) {
        errno = error;
        return -1;
      }
    }
  }
  return real(fd, messages, count, flags, timeout);
}

TEST_CASE("after a failed batched read the endpoint reads again before it waits",
          "[.][realtime][rudp][batched]") {
  // The readable wait wakes for datagrams that come after a draining read: one already queued
  // when a read failed would wait for the next arrival, and a lone datagram would never be read.
  IoThreads io(1);
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  REQUIRE(options.batchedIo);
  rudp::Endpoint server(io.Io(), kAnyLoopback, options);
  RawSocketPeer peer(kAnyLoopback, server.LocalEndpoint());
  peer.Send(HelloDatagram(1));
  REQUIRE(peer.Receive(std::chrono::seconds(10)));  // answered (a Cookie): the server is reading
  g_failNextReadableRecvmmsg = EACCES;
  peer.Send(HelloDatagram(2));  // the only datagram: its read fails, and it stays queued
  CHECK(peer.Receive(std::chrono::seconds(10)));
  CHECK(g_failNextReadableRecvmmsg == 0);  // the failure happened
  g_failNextReadableRecvmmsg = 0;
  server.Close();
}
#else
TEST_CASE("a build without the readable wait refuses to make one", "[.][realtime][rudp][batched]") {
  boost::asio::io_context io;
  Udp::socket socket = OpenSocket(io);
  CHECK_THROWS_AS(udp::ReadableWait(socket), std::logic_error);
}
#endif
