// Smoke test of the transport adapters: every message arrives, intact and in order, on each one.
//
// For each transport: start the server, connect directly, send 10,000 messages of 1 to 2000
// bytes (a sequence number in the first 4 bytes, a pattern after it), Flush, and check that the
// server's handler saw exactly those messages in that order. Exits non-zero on any failure.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "ReliableUDP/EndpointOptions.h"
#include "Transport/EnetTransport.h"
#include "Transport/ITransportUnderTest.h"
#include "Transport/ReliableUdpTransport.h"
#include "Transport/TcpTransport.h"

namespace timerwheel::perf {
namespace {

constexpr std::uint32_t kMessages = 10'000;
constexpr std::size_t kMaxSize = 2000;
constexpr int kFlushTimeoutMs = 30'000;

// 7919 is prime to 2000, so every 2000 consecutive messages cover each size from 1 to 2000 once,
// in a scrambled order (small and large messages interleaved).
std::size_t SizeOf(std::uint32_t sequence) { return 1 + (sequence * 7919u) % kMaxSize; }

// Message `sequence`: its number (little-endian, as many bytes as fit in the first 4), then a
// pattern that differs from one message to the next, so a reordered, duplicated or corrupted
// message does not compare equal.
void Fill(std::uint32_t sequence, std::vector<std::uint8_t>& message) {
  message.resize(SizeOf(sequence));
  for (std::size_t i = 0; i < message.size(); ++i) {
    message[i] = i < 4 ? static_cast<std::uint8_t>(sequence >> (8 * i))
                       : static_cast<std::uint8_t>(sequence * 131u + i * 7u);
  }
}

// What the server's handler saw; used on the server's thread, read after Stop has joined it.
struct Receiver {
  std::uint32_t received = 0;
  std::uint32_t firstBad = 0;
  bool ok = true;
  std::vector<std::uint8_t> expected;

  void OnMessage(const std::uint8_t* data, std::size_t size) {
    if (ok) {
      Fill(received, expected);
      if (received >= kMessages || size != expected.size() ||
          !std::equal(expected.begin(), expected.end(), data)) {
        ok = false;
        firstBad = received;
      }
    }
    ++received;
  }
};

bool Run(ITransportUnderTest& transport) {
  const std::string name = transport.Name();
  auto receiver = std::make_shared<Receiver>();
  try {
    const std::uint16_t port =
        transport.StartServer([receiver](const std::uint8_t* data, std::size_t size) {
          receiver->OnMessage(data, size);
        });
    transport.Connect(port);
    std::vector<std::uint8_t> message;
    std::uint64_t appBytes = 0;
    bool sent = true;
    const auto start = std::chrono::steady_clock::now();
    for (std::uint32_t sequence = 0; sequence < kMessages && sent; ++sequence) {
      Fill(sequence, message);
      sent = transport.Send(message.data(), message.size());
      appBytes += message.size();
    }
    const bool flushed = sent && transport.Flush(kFlushTimeoutMs);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    transport.Stop();  // joins the server's thread: `receiver` may be read from here on
    const TransportCounters counters = transport.ClientCounters();
    if (!sent || !flushed || !receiver->ok || receiver->received != kMessages) {
      std::string reason = !sent ? "Send failed" : !flushed ? "Flush timed out" : "wrong messages";
      reason += "; " + std::to_string(receiver->received) + " of " + std::to_string(kMessages) +
                " messages received";
      if (!receiver->ok) reason += ", the first wrong one #" + std::to_string(receiver->firstBad);
      std::printf("%s: FAILED (%s)\n", name.c_str(), reason.c_str());
      return false;
    }
    std::printf(
        "%s: %u messages OK, %.1f MB/s (wire bytes/app bytes = %.3f; %llu packets, %llu "
        "retransmissions, %lld spurious)\n",
        name.c_str(), kMessages, static_cast<double>(appBytes) / 1e6 / seconds,
        static_cast<double>(counters.wireBytesSent) / static_cast<double>(appBytes),
        static_cast<unsigned long long>(counters.packetsSent),
        static_cast<unsigned long long>(counters.retransmissions),
        static_cast<long long>(counters.spuriousRetransmissions));
    return true;
  } catch (const std::exception& e) {
    transport.Stop();
    std::printf("%s: FAILED (%s)\n", name.c_str(), e.what());
    return false;
  }
}

}  // namespace
}  // namespace timerwheel::perf

int main() {
  using namespace timerwheel::perf;  // NOLINT: a test program's main
  timerwheel::rudp::EndpointOptions knownPath;
  knownPath.congestionControl = timerwheel::rudp::CongestionControl::None;
  std::vector<std::unique_ptr<ITransportUnderTest>> transports;
  transports.push_back(
      MakeReliableUdpTransport(timerwheel::rudp::EndpointOptions{}, "ReliableUDP"));
  transports.push_back(MakeReliableUdpTransport(knownPath, "ReliableUDP known-path"));
  transports.push_back(MakeEnetTransport());
  transports.push_back(MakeTcpTransport());
  int failures = 0;
  for (auto& transport : transports) {
    if (!Run(*transport)) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
