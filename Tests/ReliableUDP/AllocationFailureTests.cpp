// What an allocation that fails part way through opening a connection leaves behind: each
// allocation the open makes is failed in turn (FailNthAllocation), and the endpoint must come out
// as it went in: no connection counted, no slot, table entry or admission count held for it,
// nothing it cannot open again.
#include <catch2/catch.hpp>
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include "ReliableUDP/Support/SimulatedNetwork.h"
#include "Support/AllocationCounter.h"

using namespace timerwheel;
using namespace timerwheel::test;
using rudp::Connection;

namespace {

constexpr Microseconds kSecond = 1'000'000;
// Far more allocations than one open makes: a sweep that reaches it has stopped finding them.
constexpr std::size_t kMaxSweep = 400;

rudp::EndpointOptions ServerOptions(const rudp::ServerKeyPair* key) {
  rudp::EndpointOptions options;
  options.acceptIncoming = true;
  if (key != nullptr) options.serverSecretKey = key->secretKey;
  return options;
}

rudp::EndpointOptions ClientOptions(const rudp::ServerKeyPair* key) {
  rudp::EndpointOptions options;
  if (key != nullptr) options.serverPublicKey = key->publicKey;
  return options;
}

// A server and a client on a fresh network; the client connects once.
struct Attempt {
  explicit Attempt(const rudp::ServerKeyPair* key)
      : network(17),
        server(network.AddHost(9000, ServerOptions(key))),
        client(network.AddHost(9001, ClientOptions(key))) {}

  void Connect() {
    client.Connect(server.Address(),
                   [this](boost::system::error_code ec, std::shared_ptr<Connection> c) {
                     ++connectCompletions;
                     connectError = ec;
                     clientSide = std::move(c);
                   });
  }
  void Accept() {
    server.Accept([this](boost::system::error_code ec, std::shared_ptr<Connection> c) {
      if (ec == boost::asio::error::no_memory) {  // the handle could not be made
        CHECK(c == nullptr);
        ++acceptFailures;
        return Accept();  // as an application would
      }
      ++acceptCompletions;
      serverSide = ec ? nullptr : std::move(c);
    });
  }
  bool RunUntilConnected() {
    return network.RunFor(60 * kSecond, [this] { return clientSide && serverSide; });
  }

  // Both ends close; afterwards neither holds anything for the connection.
  void CloseAndCheckEmpty() {
    clientSide->Abort();
    network.RunFor(5 * kSecond);
    serverSide.reset();
    clientSide.reset();
    network.RunFor(120 * kSecond);  // past the handshake entries' expiry
    for (SimulatedHost* host : {&server, &client}) {
      CHECK(host->Statistics().connectionsOpen == 0);
      const auto tables = host->Core().Tables();
      CHECK(tables.connectionIds == 0);
      CHECK(tables.handshakes == 0);
      CHECK(tables.resetTokens == 0);
      CHECK(tables.admissionAddresses == 0);
      CHECK(tables.admissionPrefixes == 0);
    }
  }

  SimulatedNetwork network;
  SimulatedHost& server;
  SimulatedHost& client;
  std::shared_ptr<Connection> clientSide, serverSide;
  boost::system::error_code connectError;
  int connectCompletions = 0;
  int acceptCompletions = 0;
  int acceptFailures = 0;  // no_memory
};

// Fails the nth allocation of `failOne(attempt, n)` for n = 1, 2, ... on a fresh Attempt each
// time, until an n past the last allocation: `failOne` returns whether its allocation failed
// (and checks what that left), or connects and returns false.
template <class FailOne>
void SweepAllocations(const rudp::ServerKeyPair* key, const char* what, FailOne failOne) {
  std::size_t failures = 0;
  for (std::size_t n = 1; n <= kMaxSweep; ++n) {
    CAPTURE(n);
    Attempt attempt(key);
    attempt.Accept();
    if (!failOne(attempt, n)) {
      CHECK(failures > 0);
      return;
    }
    ++failures;
  }
  FAIL(what << " made more than " << kMaxSweep << " allocations");
}

void SweepConnect(const rudp::ServerKeyPair* key) {
  SweepAllocations(key, "Connect", [](Attempt& attempt, std::size_t n) {
    bool threw = false, failed = false;
    // The first connect's handler: called once if the call returned, never if it threw.
    int firstCompletions = 0;
    std::shared_ptr<Connection> first;
    {
      FailNthAllocation failure(n);
      try {
        attempt.client.Connect(attempt.server.Address(),
                               [&](boost::system::error_code, std::shared_ptr<Connection> c) {
                                 ++firstCompletions;
                                 first = std::move(c);
                               });
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      failed = failure.Failed();
    }
    // Every failure comes out to the caller, and nothing else throws; except that a datagram the
    // network had no memory to hold (the Hello) is a loss, which the handshake recovers from.
    if (failed && !threw) {
      CHECK(attempt.client.Statistics().sendErrors == 1);
      REQUIRE(attempt.network.RunFor(
          60 * kSecond, [&] { return firstCompletions == 1 && attempt.serverSide != nullptr; }));
      attempt.clientSide = std::move(first);
      attempt.CloseAndCheckEmpty();
      return true;
    }
    REQUIRE(threw == failed);
    if (!failed) {  // n is past the last allocation the call makes: it connects
      REQUIRE(attempt.network.RunFor(
          60 * kSecond, [&] { return firstCompletions == 1 && attempt.serverSide != nullptr; }));
      return false;
    }
    // The call that threw left nothing: no connection, no handler to call, nothing more sent (a
    // Hello may have gone before the failure: the server answers it without keeping state).
    std::uint64_t sentAfter = 0;
    attempt.network.tap = [&](const Udp::endpoint& from, const Udp::endpoint&,
                              const std::vector<std::uint8_t>&) {
      if (from == attempt.client.Address()) ++sentAfter;
    };
    attempt.network.RunFor(10 * kSecond);
    attempt.network.tap = nullptr;
    CHECK(sentAfter == 0);
    CHECK(firstCompletions == 0);
    CHECK(attempt.client.Statistics().connectionsOpen == 0);
    // And the endpoint opens the next one as if nothing had happened.
    attempt.Connect();
    REQUIRE(attempt.RunUntilConnected());
    CHECK(attempt.connectCompletions == 1);
    CHECK(firstCompletions == 0);
    CHECK(attempt.client.Statistics().connectionsOpen == 1);
    attempt.CloseAndCheckEmpty();
    return true;
  });
}

// The server's allocations only (the network's own and the client's do not count), from the
// client's first datagram until its connection is accepted.
void SweepAccept(const rudp::ServerKeyPair* key) {
  SweepAllocations(key, "accepting", [](Attempt& attempt, std::size_t n) {
    bool threw = false, failed = false;
    {
      FailNthAllocation failure(n);
      failure.SetActive(false);
      attempt.network.onHostChange = [&](const SimulatedHost* host) {
        failure.SetActive(host == &attempt.server);
      };
      attempt.Connect();
      try {
        attempt.network.RunFor(2 * kSecond, [&] { return attempt.acceptCompletions > 0; });
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      attempt.network.onHostChange = nullptr;
      failed = failure.Failed();
    }
    // The server drops the datagram it could not afford (counted), left as if it had never
    // come; or the failure comes out of its timer dispatch; or, once the connection is open, its
    // accept completes with no_memory and the connection is closed.
    const bool dropped = attempt.server.Statistics().droppedOutOfMemory > 0;
    REQUIRE((threw || dropped || attempt.acceptFailures > 0) == failed);
    REQUIRE(int{threw} + int{dropped} + int{attempt.acceptFailures > 0} <= 1);
    if (!failed) {
      REQUIRE(attempt.RunUntilConnected());
      return false;
    }
    // The client tries again, and gets in (or its connection was open before the failure, which
    // came from the server's timer dispatch: the queue reserves before it detaches, so nothing
    // is lost, and the expiries run at the next dispatch).
    if (!attempt.RunUntilConnected()) {
      // The server took back a connection after its Welcome had gone (the client's side ends as
      // after a server restart: at its idle timeout), or closed one it could not hand over;
      // the client connects again.
      REQUIRE(attempt.clientSide);
      REQUIRE(attempt.network.RunFor(
          120 * kSecond, [&] { return attempt.client.Statistics().connectionsOpen == 0; }));
      CHECK(attempt.server.Statistics().connectionsOpen == 0);
      attempt.clientSide.reset();
      attempt.Connect();
      REQUIRE(attempt.RunUntilConnected());
    }
    // The accept's handler waited through the failure, and was called once.
    CHECK(attempt.acceptCompletions == 1);
    CHECK(attempt.server.Statistics().connectionsOpen == 1);
    attempt.CloseAndCheckEmpty();
    return true;
  });
}

}  // namespace

TEST_CASE("a connect whose allocation fails throws and leaves the endpoint as it was",
          "[rudp][sim][allocation-failure]") {
  SECTION("plaintext") { SweepConnect(nullptr); }
  SECTION("encrypted") {
    const auto key = rudp::MakeServerKeyPair();
    SweepConnect(&key);
  }
}

TEST_CASE("an accept whose allocation fails leaves the server as if the handshake never came",
          "[rudp][sim][allocation-failure]") {
  SECTION("plaintext") { SweepAccept(nullptr); }
  SECTION("encrypted") {
    const auto key = rudp::MakeServerKeyPair();
    SweepAccept(&key);
  }
}

// IEndpointIo::Post may fail (its memory); the completion it could not post stays where it was.
TEST_CASE("an accept whose completion cannot be posted keeps its place",
          "[rudp][sim][allocation-failure]") {
  Attempt attempt(nullptr);
  SECTION("a waiting accept is there for the next connection") {
    attempt.Accept();
    attempt.network.failPostsOf = &attempt.server;
    attempt.network.failPosts = 1;
    attempt.Connect();
    // The server could not hand the connection over: it took the connection back and dropped
    // the datagram. Its Welcome had gone, so the client's side ends as after a server restart,
    // and the client connects again.
    REQUIRE(attempt.network.RunFor(60 * kSecond, [&] {
      return attempt.server.Statistics().droppedOutOfMemory == 1 && attempt.clientSide;
    }));
    CHECK(attempt.network.failPosts == 0);
    CHECK(attempt.server.Statistics().connectionsOpen == 0);
    REQUIRE(attempt.network.RunFor(
        120 * kSecond, [&] { return attempt.client.Statistics().connectionsOpen == 0; }));
    attempt.clientSide.reset();
    attempt.Connect();
    REQUIRE(attempt.RunUntilConnected());
    CHECK(attempt.acceptCompletions == 1);
  }
  SECTION("a connection waiting for an accept is there for the next accept") {
    attempt.Connect();
    REQUIRE(attempt.network.RunFor(60 * kSecond, [&] {
      return attempt.clientSide && attempt.server.Statistics().connectionsAccepted == 1;
    }));
    attempt.network.failPostsOf = &attempt.server;
    attempt.network.failPosts = 1;
    int failedAcceptCompletions = 0;
    CHECK_THROWS_AS(
        attempt.server.Accept([&](boost::system::error_code, std::shared_ptr<Connection>) {
          ++failedAcceptCompletions;
        }),
        std::bad_alloc);
    CHECK(attempt.network.failPosts == 0);
    attempt.Accept();
    REQUIRE(attempt.RunUntilConnected());
    CHECK(attempt.acceptCompletions == 1);
    CHECK(failedAcceptCompletions == 0);
  }
  CHECK(attempt.server.Statistics().connectionsOpen == 1);
  attempt.CloseAndCheckEmpty();
}

TEST_CASE("a receive whose completion cannot be posted keeps its message for its handler",
          "[rudp][sim][allocation-failure]") {
  Attempt attempt(nullptr);
  attempt.Accept();
  attempt.Connect();
  REQUIRE(attempt.RunUntilConnected());
  const std::vector<std::uint8_t> first{1, 2, 3}, second{4, 5};
  int sent = 0;
  for (const auto* message : {&first, &second}) {
    attempt.clientSide->AsyncSend(boost::asio::buffer(*message),
                                  [&](boost::system::error_code ec) { sent += ec ? 0 : 1; });
  }
  REQUIRE(attempt.network.RunFor(5 * kSecond, [&] { return sent == 2; }));
  attempt.network.RunFor(kSecond);  // both are at the server, waiting for receives

  std::vector<std::uint8_t> a, b;
  std::vector<int> order;
  attempt.network.failPostsOf = &attempt.server;
  attempt.network.failPosts = 1;
  // The first receive reads its message, but its completion cannot be posted: the call has
  // taken the handler, so it does not throw, and the completion waits for the next pump.
  CHECK_NOTHROW(attempt.serverSide->AsyncReceive(a, [&](boost::system::error_code ec) {
    CHECK(!ec);
    order.push_back(1);
  }));
  CHECK(attempt.network.failPosts == 0);
  attempt.serverSide->AsyncReceive(b, [&](boost::system::error_code ec) {
    CHECK(!ec);
    order.push_back(2);
  });
  attempt.network.RunFor(kSecond);
  CHECK(order == std::vector<int>{1, 2});
  CHECK(a == first);  // not overwritten by the second message, which was not lost
  CHECK(b == second);
  attempt.CloseAndCheckEmpty();
}

TEST_CASE("a connection's end cut short by a post that fails finishes at its next event",
          "[rudp][sim][allocation-failure]") {
  Attempt attempt(nullptr);
  attempt.Accept();
  attempt.Connect();
  REQUIRE(attempt.RunUntilConnected());
  std::vector<std::uint8_t> a, b;
  std::vector<boost::system::error_code> results;
  for (auto* buffer : {&a, &b}) {
    attempt.serverSide->AsyncReceive(*buffer,
                                     [&](boost::system::error_code ec) { results.push_back(ec); });
  }
  attempt.network.failPostsOf = &attempt.server;
  attempt.network.failPosts = 1;
  // The abort ends the connection, but the first receive's completion cannot be posted.
  CHECK_THROWS_AS(attempt.serverSide->Abort(), std::bad_alloc);
  CHECK(attempt.network.failPosts == 0);
  CHECK(attempt.server.Statistics().connectionsOpen == 1);
  // Its still-armed timers (or the client's packets) bring the end back: both receives
  // complete, once each, and the connection is retired.
  REQUIRE(attempt.network.RunFor(120 * kSecond, [&] {
    return results.size() == 2 && attempt.server.Statistics().connectionsOpen == 0;
  }));
  attempt.network.RunFor(kSecond);
  CHECK(results.size() == 2);
  for (const auto& ec : results) CHECK(ec);
  attempt.CloseAndCheckEmpty();
}

// A send whose flush runs out of memory part way through a packet: each allocation of the call
// (the message queued, the stream's chunks, the controller made by the first data packet, the
// sent-packet log's growth, the network's delivery of a datagram) is failed in turn. Whatever the
// call had put in a packet must be either unsent or recorded for retransmission, and whatever it
// left queued must go soon. With the link down meanwhile the call's datagrams are dropped, so data
// sent but not recorded would never arrive; with it up, the network's own allocation fails
// instead. When the call threw, the application sends again, as it would. Each of the four
// mends fails it: a stream chunk that failed half way through a message (its bytes copied twice),
// the recording made before the packet, the datagram the network could not hold counted as a
// loss, and the retry of what a failure left queued.
TEST_CASE("a send whose flush runs out of memory part way through a packet loses no data",
          "[rudp][sim][allocation-failure]") {
  std::vector<std::uint8_t> message(20'000);
  for (std::size_t i = 0; i < message.size(); ++i) message[i] = static_cast<std::uint8_t>(i * 7);
  for (const bool linkDown : {true, false}) {
    CAPTURE(linkDown);
    std::size_t failures = 0;
    for (std::size_t n = 1;; ++n) {
      CAPTURE(n);
      REQUIRE(n <= kMaxSweep);
      Attempt attempt(nullptr);
      attempt.Accept();
      attempt.Connect();
      REQUIRE(attempt.RunUntilConnected());
      std::vector<std::uint8_t> received;
      int receives = 0;
      boost::system::error_code receiveError;
      attempt.serverSide->AsyncReceive(received, [&](boost::system::error_code ec) {
        receiveError = ec;
        CHECK(!ec);
        ++receives;
      });
      int sends = 0;
      const auto onSent = [&](boost::system::error_code ec) {
        CHECK(!ec);
        ++sends;
      };
      auto& link = attempt.network.Link(attempt.client.Address(), attempt.server.Address());
      link.down = linkDown;
      bool threw = false, failed = false;
      {
        FailNthAllocation failure(n);
        try {
          attempt.clientSide->AsyncSend(boost::asio::buffer(message), onSent);
        } catch (const std::bad_alloc&) {
          threw = true;
        }
        failed = failure.Failed();
      }
      link.down = false;
      if (threw) attempt.clientSide->AsyncSend(boost::asio::buffer(message), onSent);
      // Within a few probe timeouts (1 s at most here), long before a keepalive (15 s) could stand
      // in for a retry or a loss timer that the failure left unarmed.
      REQUIRE(attempt.network.RunFor(5 * kSecond, [&] { return receives == 1 && sends == 1; }));
      const bool intact = received == message;
      CAPTURE(threw, failed, received.size(), receiveError.message());
      CHECK(intact);
      attempt.CloseAndCheckEmpty();
      if (!failed) break;  // n is past the last allocation the call makes
      ++failures;
    }
    CHECK(failures > 0);
  }
}

// The server's allocations while an encrypted connection ends (its peer aborts it), each failed
// in turn: the end must still be complete. A connection that ends within its handshake's cookie
// lifetime leaves its handshake among the retired ones (a replay of it is refused), and the
// server forgets the connection itself: no slot, count or table entry held for it, and nothing
// waiting for an event that, for a connection whose timers are gone, may never come. The end
// allocates nothing now (the retired handshake's room and the free slot list's are made at the
// accept), so the first n finds no allocation; before that, failing the free list's growth or
// the retired handshake's entry left the connection counted and in its slot for good.
TEST_CASE("a connection's end whose allocation fails still ends it, and still refuses replays",
          "[rudp][sim][allocation-failure]") {
  const auto key = rudp::MakeServerKeyPair();
  for (std::size_t n = 1; n <= kMaxSweep; ++n) {
    CAPTURE(n);
    Attempt attempt(&key);
    attempt.Accept();
    attempt.Connect();
    REQUIRE(attempt.RunUntilConnected());
    bool failed = false;
    {
      FailNthAllocation failure(n);
      failure.SetActive(false);
      attempt.network.onHostChange = [&](const SimulatedHost* host) {
        failure.SetActive(host == &attempt.server);
      };
      attempt.clientSide->Abort();
      try {
        attempt.network.RunFor(5 * kSecond,
                               [&] { return attempt.server.Statistics().connectionsOpen == 0; });
      } catch (const std::bad_alloc&) {
      }
      attempt.network.onHostChange = nullptr;
      failed = failure.Failed();
    }
    // Nothing more is needed: no datagram and no call (the peer is gone, the application waits).
    attempt.network.RunFor(kSecond);
    CHECK(attempt.server.Statistics().connectionsOpen == 0);
    const auto tables = attempt.server.Core().Tables();
    CHECK(tables.connectionIds == 0);
    CHECK(tables.handshakes == 0);
    CHECK(tables.resetTokens == 0);
    CHECK(tables.retiredHandshakes == 1);
    attempt.CloseAndCheckEmpty();
    if (!failed) return;  // n is past the end's last allocation
  }
  FAIL("the end made more than " << kMaxSweep << " allocations");
}
