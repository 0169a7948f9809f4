// Batched UDP I/O: many datagrams per system call (Linux: sendmmsg and recvmmsg, with UDP
// segmentation offload on send and receive offload where the kernel has them; elsewhere one
// datagram per call behind the same interface). Shared by ReliableUDP's Endpoint and the relay.
//
// Why here and not in the engine: the engine still produces and consumes datagrams one at a time
// (its congestion controller, pacer and hostile-peer bounds see each); batching only changes how
// many of them one system call carries. A send batch holds what one call into the engine produced
// (one receive batch handled, one timer dispatched, one application call), so a segmented send
// never carries more than the pacer released in that call.
//
// Offload (Linux):
// - UDP_SEGMENT (GSO): a run of datagrams to the same address, all of one size except perhaps a
//   shorter last one, at most 64 of them and 64 KiB, goes down as one message with the segment
//   size in a control message; the kernel (or the NIC) cuts it into the original datagrams, so
//   the receiver sees exactly what unsegmented sends would have produced.
// - UDP_GRO: the kernel may hand over several datagrams from one sender as one buffer with the
//   segment size in a control message; ForEachDatagram cuts it back into the datagrams.
// A segmented send that fails, whatever the error, is sent again one datagram per message, so
// that each datagram has its own fate (one the socket refuses is dropped alone; nothing is sent
// twice or out of order). Only then is the failure judged:
// - EIO, EINVAL or ENOPROTOOPT (no checksum offload on the device, the socket cannot segment;
//   before Linux 6.13 and 6.1.129 also a segment over the path's MTU), and the socket took at
//   least one of the datagrams alone: the kernel refused segmentation. It is turned off for this
//   object and counted in offloadRefusals. If none of them went alone either (a send to port 0
//   fails with EINVAL before any segmentation), it was the destination, not the offload: nothing
//   changes, so a remote sender cannot turn the offload off.
// - EMSGSIZE (Linux 6.13 and 6.1.129 on): the segment size is over that peer's path MTU. The
//   offload stays on for every other peer; this peer's runs of that size or larger go
//   unsegmented (the kernel fragments each datagram, as it would have unsegmented) for the next
//   kTooLargeDatagrams of them (16 full runs of 64), then segmentation
//   is tried again, as a path's MTU can grow back. A few
//   peers are remembered (kTooLargePeers); one more replaces the one closest to its retry.
// - Anything else (no route, no buffer space): that message's error only; nothing changes.
// The receive offload: if setsockopt(UDP_GRO) fails it is off for the batch, counted once; a
// second batch reading the same socket takes the first's answer (ShareReceiveOffload) instead of
// asking again, so a refusal counts once per socket.
// A datagram that does not fit its receive buffer (MSG_TRUNC: over kMessageSize, or a GRO buffer
// over it) is never handed on cut short: it is dropped and counted in truncatedDatagrams (of a GRO
// buffer, the datagrams that fit whole are handed on, the rest dropped and counted).
//
// Thread safety: none; use each object under the lock that guards its socket.
// Memory: fixed at construction; Add, Flush, Receive and ForEachDatagram allocate nothing.
#pragma once

#include <array>
#include <boost/asio/ip/udp.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace timerwheel::udp {

// What the batched path did, for the caller's statistics and the benchmark.
struct BatchCounters {
  std::uint64_t sendCalls = 0;          // system calls that sent (or tried to)
  std::uint64_t segmentedMessages = 0;  // messages that carried several datagrams (GSO)
  std::uint64_t receiveCalls = 0;       // system calls that received at least one datagram
  std::uint64_t coalescedMessages = 0;  // received messages that held several datagrams (GRO)
  std::uint64_t offloadRefusals = 0;    // GSO or GRO refused by the kernel and turned off
  // received datagrams dropped because they did not fit the buffer (MSG_TRUNC): never handed on
  std::uint64_t truncatedDatagrams = 0;
};

// True where this build batches system calls (Linux); elsewhere the classes below send and
// receive one datagram per call.
bool BatchedSystemCallsAvailable() noexcept;

// Datagrams held, in order, until Flush hands them to the socket.
class SendBatch {
 public:
  // Room for `capacity` datagrams of at most `maxDatagramSize` bytes each.
  SendBatch(std::size_t capacity, std::size_t maxDatagramSize, bool segmentationOffload);
  ~SendBatch();
  SendBatch(const SendBatch&) = delete;
  SendBatch& operator=(const SendBatch&) = delete;

  bool Empty() const noexcept { return m_head == m_count; }
  bool Full() const noexcept;
  std::size_t Pending() const noexcept { return m_count - m_head; }

  // Copies one datagram in. Precondition: !Full() and size <= maxDatagramSize (checked: throws
  // std::length_error and changes nothing).
  void Add(const boost::asio::ip::udp::endpoint& to, const std::uint8_t* data, std::size_t size);

  struct FlushResult {
    std::size_t sent = 0;     // datagrams the socket took
    std::size_t failed = 0;   // datagrams dropped because their send failed (e.g. no route)
    bool wouldBlock = false;  // the socket is full: the rest wait, in order, for the next Flush
  };
  // Sends what is held, oldest first, until the batch is empty or the socket would block. The
  // socket must be non-blocking.
  FlushResult Flush(boost::asio::ip::udp::socket& socket);
  // Forgets what is held (for a caller that treats a full socket as a loss); returns how many.
  std::size_t DropPending() noexcept;

  bool SegmentationOffload() const noexcept { return m_segmentation; }
  const BatchCounters& Counters() const noexcept { return m_counters; }

  // Test hooks: the next segmented send fails as if the kernel refused it (EIO), exercising the
  // fallback on kernels that would accept it; or as if the kernel returned `error` for it (an
  // errno value; Linux, the only platform that segments).
  void RefuseNextSegmentedSendForTesting() noexcept;
  void FailNextSegmentedSendForTesting(int error) noexcept { m_failNextSegmented = error; }

  // The peers whose path MTU a segment size exceeded that are remembered, and for how many of
  // their runs (see the top of this file).
  static constexpr std::size_t kTooLargePeers = 8;
  static constexpr std::uint32_t kTooLargeDatagrams = 1024;

 private:
  struct Datagram {
    boost::asio::ip::udp::endpoint to;
    std::size_t offset = 0;  // in m_bytes
    std::size_t size = 0;
  };
  // A peer whose path MTU is under `segmentSize` (EMSGSIZE): its runs of datagrams that large or
  // larger go unsegmented while datagramsLeft > 0.
  struct TooLarge {
    boost::asio::ip::udp::endpoint to;
    std::size_t segmentSize = 0;
    std::uint32_t datagramsLeft = 0;  // 0: the entry is free
  };
  // Datagrams [first, first + n) that can go as one segmented message.
  std::size_t SegmentRun(std::size_t first) noexcept;
  void RememberTooLarge(const boost::asio::ip::udp::endpoint& to, std::size_t segmentSize) noexcept;
  // The n datagrams at m_head left the batch, sent (`sent`) or failed.
  void Advance(std::size_t n, bool sent) noexcept;
  void Compact() noexcept;
  FlushResult FlushOneByOne(boost::asio::ip::udp::socket& socket);

  std::size_t m_maxDatagramSize;
  // capacity * maxDatagramSize, datagrams packed in order; not zeroed, so pages never used are
  // never touched (an endpoint with one idle connection does not pay for a full batch)
  std::unique_ptr<std::uint8_t[]> m_bytes;
  std::vector<Datagram> m_datagrams;  // [m_head, m_count) wait
  std::size_t m_head = 0;
  std::size_t m_count = 0;
  std::size_t m_end = 0;  // bytes used in m_bytes
  bool m_segmentation;
  // The datagrams [m_head, m_head + m_unsegmentedLeft) go one per message: their segmented send
  // failed. m_pendingRefusal: it failed as a refusal would (EIO, EINVAL, ENOPROTOOPT), which is
  // concluded if the socket takes one of them alone.
  std::size_t m_unsegmentedLeft = 0;
  bool m_pendingRefusal = false;
  std::array<TooLarge, kTooLargePeers> m_tooLarge;
  bool m_anyTooLarge = false;   // m_tooLarge has had an entry (until then it is not searched)
  int m_failNextSegmented = 0;  // errno for the next segmented send (test hook); 0: none
  BatchCounters m_counters;
  struct System;  // the sendmmsg headers (Linux)
  std::unique_ptr<System> m_system;
};

// Room for a batch of received datagrams and the system call that fills it.
class ReceiveBatch {
 public:
  // `messages` buffers of kMessageSize bytes (every UDP datagram fits, as does a GRO batch).
  static constexpr std::size_t kMessageSize = 65536;
  explicit ReceiveBatch(std::size_t messages);
  ~ReceiveBatch();
  ReceiveBatch(const ReceiveBatch&) = delete;
  ReceiveBatch& operator=(const ReceiveBatch&) = delete;

  // Asks the kernel for UDP_GRO on `socket`. False if it refused (counted; the batch then
  // receives one datagram per message) or the platform has no such option. Once per socket: a
  // further batch reading the same socket calls ShareReceiveOffload instead.
  bool EnableReceiveOffload(boost::asio::ip::udp::socket& socket);
  // This batch reads the socket `first` asked for UDP_GRO (EnableReceiveOffload), as `first`
  // does: with the segment sizes if the kernel agreed, without asking it again or counting.
  void ShareReceiveOffload(const ReceiveBatch& first) noexcept {
    m_receiveOffload = first.m_receiveOffload;
  }
  bool ReceiveOffload() const noexcept { return m_receiveOffload; }

  // One non-blocking system call. Returns how many messages arrived (each may hold several
  // datagrams; one cut short by its buffer is counted here and in truncatedDatagrams, and
  // ForEachDatagram skips it), 0 with `error` set (would_block when nothing is waiting).
  std::size_t Receive(boost::asio::ip::udp::socket& socket, boost::system::error_code& error);

  // Calls visit(from, data, size) for every whole datagram of the last Receive, in arrival order.
  template <class Visit>
  void ForEachDatagram(Visit&& visit) const {
    for (std::size_t i = 0; i < m_received; ++i) {
      const Message& message = m_messages[i];
      if (message.dropped) continue;
      const std::uint8_t* data = Buffer(i);
      const std::size_t step = message.segmentSize != 0 ? message.segmentSize : message.size;
      std::size_t offset = 0;
      do {
        const std::size_t size = (message.size - offset < step) ? message.size - offset : step;
        visit(message.from, data + offset, size);
        offset += size;
      } while (offset < message.size);
    }
  }

  const BatchCounters& Counters() const noexcept { return m_counters; }

  // Test hook: the next EnableReceiveOffload fails as if the kernel refused it (ENOPROTOOPT).
  void RefuseNextReceiveOffloadForTesting() noexcept { m_refuseNextOffload = true; }
  // Test hook: the following Receives offer the kernel at most `bytes` of each buffer, so that a
  // longer datagram (or GRO buffer) arrives cut short, as one over kMessageSize would.
  void LimitMessageSizeForTesting(std::size_t bytes) noexcept {
    m_messageLimit = bytes < kMessageSize ? bytes : kMessageSize;
  }

 private:
  struct Message {
    boost::asio::ip::udp::endpoint from;
    std::size_t size = 0;
    std::size_t segmentSize = 0;  // GRO: the datagrams' size (the last may be shorter); 0: one
    bool dropped = false;         // cut short (MSG_TRUNC) with no whole datagram in it
  };
  const std::uint8_t* Buffer(std::size_t i) const noexcept {
    return m_bytes.get() + i * kMessageSize;
  }

  std::unique_ptr<std::uint8_t[]> m_bytes;  // not zeroed: the kernel writes what arrives
  std::vector<Message> m_messages;
  std::size_t m_received = 0;
  bool m_receiveOffload = false;
  bool m_refuseNextOffload = false;
  std::size_t m_messageLimit = kMessageSize;  // bytes of each buffer offered (test hook)
  BatchCounters m_counters;
  struct System;  // the recvmmsg headers (Linux)
  std::unique_ptr<System> m_system;
};

}  // namespace timerwheel::udp
