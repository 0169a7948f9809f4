// Batched UDP I/O (see DatagramBatch.h): sendmmsg/recvmmsg with UDP_SEGMENT/UDP_GRO on Linux,
// Asio's one-datagram calls elsewhere.
#include "UdpSocket/DatagramBatch.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#ifdef __linux__
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <cerrno>
#endif

namespace timerwheel::udp {
namespace {

using Udp = boost::asio::ip::udp;

// The kernel's bounds on one segmented send: UDP_MAX_SEGMENTS, and the UDP length field.
constexpr std::size_t kMaxSegments = 64;
constexpr std::size_t kMaxSegmentedBytes = 65507;

bool IsWouldBlock(const boost::system::error_code& error) {
  return error == boost::asio::error::would_block || error == boost::asio::error::try_again;
}

#ifdef __linux__
// A segmented send failed as it does when the kernel or the device cannot segment (and, before
// Linux 6.13 and 6.1.129, when a segment is over the path's MTU); also as it does for a bad
// destination (EINVAL for port 0), which is why the datagrams alone decide (Flush).
bool IsRefusal(int error) { return error == EIO || error == EINVAL || error == ENOPROTOOPT; }
#endif

}  // namespace

bool BatchedSystemCallsAvailable() noexcept {
#ifdef __linux__
  return true;
#else
  return false;
#endif
}

// ---------------------------------------------------------------------------------------------
// SendBatch

#ifdef __linux__
struct SendBatch::System {
  explicit System(std::size_t capacity)
      : headers(capacity), vectors(capacity), controls(capacity * kControlSize) {}
  static constexpr std::size_t kControlSize = CMSG_SPACE(sizeof(std::uint16_t));
  std::vector<mmsghdr> headers;
  std::vector<iovec> vectors;
  std::vector<unsigned char> controls;  // kControlSize per header, aligned by CMSG_SPACE
  std::vector<std::size_t> datagramsIn = std::vector<std::size_t>(headers.size());
};
#else
struct SendBatch::System {
  explicit System(std::size_t) {}
};
#endif

SendBatch::SendBatch(std::size_t capacity, std::size_t maxDatagramSize, bool segmentationOffload)
    : m_maxDatagramSize(maxDatagramSize),
      m_bytes(new std::uint8_t[capacity * maxDatagramSize]),
      m_datagrams(capacity),
      m_segmentation(segmentationOffload && BatchedSystemCallsAvailable()),
      m_system(std::make_unique<System>(capacity)) {
  if (capacity == 0 || maxDatagramSize == 0) {
    throw std::invalid_argument("SendBatch: capacity and maxDatagramSize must be positive");
  }
}

SendBatch::~SendBatch() = default;

bool SendBatch::Full() const noexcept { return m_count == m_datagrams.size() && m_head == 0; }

void SendBatch::Add(const Udp::endpoint& to, const std::uint8_t* data, std::size_t size) {
  if (size > m_maxDatagramSize) throw std::length_error("SendBatch: datagram over the maximum");
  if (Full()) throw std::length_error("SendBatch: full");
  if (m_count == m_datagrams.size()) Compact();
  Datagram& datagram = m_datagrams[m_count];
  datagram.to = to;
  datagram.offset = m_end;
  datagram.size = size;
  if (size != 0) std::memcpy(m_bytes.get() + m_end, data, size);
  m_end += size;
  ++m_count;
}

void SendBatch::Compact() noexcept {
  // Move the waiting datagrams (and their bytes, which are contiguous) to the front.
  if (m_head == 0) return;
  const std::size_t from = m_head < m_count ? m_datagrams[m_head].offset : m_end;
  std::memmove(m_bytes.get(), m_bytes.get() + from, m_end - from);
  for (std::size_t i = m_head; i < m_count; ++i) {
    Datagram& moved = m_datagrams[i - m_head];
    moved = m_datagrams[i];
    moved.offset -= from;
  }
  m_count -= m_head;
  m_end -= from;
  m_head = 0;
}

std::size_t SendBatch::DropPending() noexcept {
  const std::size_t dropped = Pending();
  m_head = m_count = m_end = 0;
  m_unsegmentedLeft = 0;
  m_pendingRefusal = false;
  return dropped;
}

void SendBatch::RefuseNextSegmentedSendForTesting() noexcept {
#ifdef __linux__
  m_failNextSegmented = EIO;
#endif
}

std::size_t SendBatch::SegmentRun(std::size_t first) noexcept {
  const Datagram& lead = m_datagrams[first];
  if (!m_segmentation || lead.size == 0 || first - m_head < m_unsegmentedLeft) return 1;
  if (m_anyTooLarge) {
    for (TooLarge& peer : m_tooLarge) {
      if (peer.datagramsLeft != 0 && lead.size >= peer.segmentSize && peer.to == lead.to) {
        --peer.datagramsLeft;  // per datagram laid out (again, after a partial send)
        return 1;
      }
    }
  }
  std::size_t n = 1;
  std::size_t bytes = lead.size;
  while (first + n < m_count && n < kMaxSegments) {
    const Datagram& next = m_datagrams[first + n];
    if (next.size == 0 || next.size > lead.size || bytes + next.size > kMaxSegmentedBytes ||
        next.to != lead.to) {
      break;
    }
    bytes += next.size;
    ++n;
    if (next.size < lead.size) break;  // only the last segment may be shorter
  }
  return n;
}

void SendBatch::RememberTooLarge(const Udp::endpoint& to, std::size_t segmentSize) noexcept {
  TooLarge* slot = &m_tooLarge[0];
  for (TooLarge& peer : m_tooLarge) {
    if (peer.datagramsLeft != 0 && peer.to == to) {
      slot = &peer;  // the peer's entry: the smaller size holds
      segmentSize = std::min(segmentSize, peer.segmentSize);
      break;
    }
    if (peer.datagramsLeft < slot->datagramsLeft)
      slot = &peer;  // a free one, or the nearest its retry
  }
  slot->to = to;
  slot->segmentSize = segmentSize;
  slot->datagramsLeft = kTooLargeDatagrams;
  m_anyTooLarge = true;
}

void SendBatch::Advance(std::size_t n, bool sent) noexcept {
  m_head += n;
  if (m_unsegmentedLeft == 0) return;
  // One of a failed segmented send's datagrams, sent alone (n is 1).
  --m_unsegmentedLeft;
  if (sent && m_pendingRefusal) {
    // The socket takes them alone but not together: the kernel refused the segmentation.
    m_segmentation = false;
    ++m_counters.offloadRefusals;
    m_unsegmentedLeft = 0;
  }
  if (m_unsegmentedLeft == 0 || sent) m_pendingRefusal = false;
}

SendBatch::FlushResult SendBatch::FlushOneByOne(Udp::socket& socket) {
  FlushResult result;
  while (!Empty()) {
    const Datagram& datagram = m_datagrams[m_head];
    boost::system::error_code error;
    ++m_counters.sendCalls;
    socket.send_to(boost::asio::buffer(m_bytes.get() + datagram.offset, datagram.size), datagram.to,
                   0, error);
    if (IsWouldBlock(error)) {
      result.wouldBlock = true;
      return result;
    }
    ++(error ? result.failed : result.sent);
    ++m_head;
  }
  m_head = m_count = m_end = 0;
  return result;
}

SendBatch::FlushResult SendBatch::Flush(Udp::socket& socket) {
#ifndef __linux__
  return FlushOneByOne(socket);
#else
  FlushResult result;
  System& system = *m_system;
  while (!Empty()) {
    // Lay out the headers: one message per datagram, or per segmentable run.
    std::size_t messages = 0;
    // After a segmented send that failed as a refusal would, its datagrams alone (one per
    // message): what they do decides whether the rest may be segmented.
    const std::size_t end = m_pendingRefusal ? m_head + m_unsegmentedLeft : m_count;
    for (std::size_t i = m_head; i < end;) {
      const std::size_t run = SegmentRun(i);
      const Datagram& lead = m_datagrams[i];
      const Datagram& last = m_datagrams[i + run - 1];
      iovec& vector = system.vectors[messages];
      vector.iov_base = m_bytes.get() + lead.offset;
      vector.iov_len = last.offset + last.size - lead.offset;
      msghdr& header = system.headers[messages].msg_hdr;
      header = msghdr{};
      header.msg_name = const_cast<sockaddr*>(lead.to.data());
      header.msg_namelen = static_cast<socklen_t>(lead.to.size());
      header.msg_iov = &vector;
      header.msg_iovlen = 1;
      if (run > 1) {
        unsigned char* control = system.controls.data() + messages * System::kControlSize;
        std::memset(control, 0, System::kControlSize);
        header.msg_control = control;
        header.msg_controllen = System::kControlSize;
        cmsghdr* segment = CMSG_FIRSTHDR(&header);
        segment->cmsg_level = SOL_UDP;
        segment->cmsg_type = UDP_SEGMENT;
        segment->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
        const auto segmentSize = static_cast<std::uint16_t>(lead.size);
        std::memcpy(CMSG_DATA(segment), &segmentSize, sizeof segmentSize);
      }
      system.datagramsIn[messages] = run;
      ++messages;
      i += run;
    }
    int sent = 0;
    int error = 0;
    if (m_failNextSegmented != 0 && system.datagramsIn[0] > 1) {
      sent = -1;
      error = m_failNextSegmented;
      m_failNextSegmented = 0;
    } else {
      ++m_counters.sendCalls;
      sent = ::sendmmsg(socket.native_handle(), system.headers.data(),
                        static_cast<unsigned>(messages), 0);
      if (sent < 0) error = errno;
    }
    if (sent < 0) {
      if (error == EAGAIN || error == EWOULDBLOCK) {
        result.wouldBlock = true;
        return result;
      }
      if (error == EINTR) continue;
      if (system.datagramsIn[0] > 1) {
        // The first message, a segmented run, failed: its datagrams go again one per message,
        // each to its own fate, and they tell whether the kernel refused the segmentation.
        const Datagram& lead = m_datagrams[m_head];
        if (error == EMSGSIZE) RememberTooLarge(lead.to, lead.size);
        m_unsegmentedLeft = system.datagramsIn[0];
        m_pendingRefusal = IsRefusal(error);
        continue;
      }
      // The first message, one datagram, cannot be sent (no route, port 0, too long): it alone
      // is dropped.
      ++result.failed;
      Advance(1, false);
      continue;
    }
    for (int m = 0; m < sent; ++m) {
      const std::size_t datagrams = system.datagramsIn[static_cast<std::size_t>(m)];
      result.sent += datagrams;
      Advance(datagrams, true);
      if (datagrams > 1) ++m_counters.segmentedMessages;
    }
  }
  m_head = m_count = m_end = 0;
  return result;
#endif
}

// ---------------------------------------------------------------------------------------------
// ReceiveBatch

#ifdef __linux__
struct ReceiveBatch::System {
  explicit System(std::size_t messages)
      : headers(messages), vectors(messages), names(messages), controls(messages * kControlSize) {}
  static constexpr std::size_t kControlSize = CMSG_SPACE(sizeof(int));
  std::vector<mmsghdr> headers;
  std::vector<iovec> vectors;
  std::vector<sockaddr_storage> names;
  std::vector<unsigned char> controls;
};
#else
struct ReceiveBatch::System {
  explicit System(std::size_t) {}
};
#endif

ReceiveBatch::ReceiveBatch(std::size_t messages)
    : m_bytes(new std::uint8_t[std::max<std::size_t>(messages, 1) * kMessageSize]),
      m_messages(std::max<std::size_t>(messages, 1)),
      m_system(std::make_unique<System>(m_messages.size())) {}

ReceiveBatch::~ReceiveBatch() = default;

bool ReceiveBatch::EnableReceiveOffload(Udp::socket& socket) {
#ifdef __linux__
  const int on = 1;
  const bool refuse = m_refuseNextOffload;
  m_refuseNextOffload = false;
  if (!refuse && ::setsockopt(socket.native_handle(), SOL_UDP, UDP_GRO, &on, sizeof on) == 0) {
    m_receiveOffload = true;
    return true;
  }
  ++m_counters.offloadRefusals;
#else
  (void)socket;
  m_refuseNextOffload = false;
#endif
  m_receiveOffload = false;
  return false;
}

std::size_t ReceiveBatch::Receive(Udp::socket& socket, boost::system::error_code& error) {
  m_received = 0;
  error.clear();
#ifndef __linux__
  Message& message = m_messages[0];
  message.size = socket.receive_from(boost::asio::buffer(m_bytes.get(), m_messageLimit),
                                     message.from, 0, error);
  message.segmentSize = 0;
  if (error) return 0;
  ++m_counters.receiveCalls;
  m_received = 1;
  return 1;
#else
  System& system = *m_system;
  const std::size_t count = m_messages.size();
  for (std::size_t i = 0; i < count; ++i) {
    system.vectors[i].iov_base = m_bytes.get() + i * kMessageSize;
    system.vectors[i].iov_len = m_messageLimit;
    msghdr& header = system.headers[i].msg_hdr;
    header = msghdr{};
    header.msg_name = &system.names[i];
    header.msg_namelen = sizeof(sockaddr_storage);
    header.msg_iov = &system.vectors[i];
    header.msg_iovlen = 1;
    if (m_receiveOffload) {
      header.msg_control = system.controls.data() + i * System::kControlSize;
      header.msg_controllen = System::kControlSize;
    }
  }
  int received = 0;
  do {
    // MSG_TRUNC: a message's length is the datagram's (or GRO buffer's) whole length, not what
    // fitted, so that what a cut-short one lost can be counted.
    received = ::recvmmsg(socket.native_handle(), system.headers.data(),
                          static_cast<unsigned>(count), MSG_DONTWAIT | MSG_TRUNC, nullptr);
  } while (received < 0 && errno == EINTR);
  if (received < 0) {
    error = boost::system::error_code(errno, boost::asio::error::get_system_category());
    return 0;
  }
  ++m_counters.receiveCalls;
  for (int i = 0; i < received; ++i) {
    const auto index = static_cast<std::size_t>(i);
    const msghdr& header = system.headers[index].msg_hdr;
    Message& message = m_messages[index];
    const std::size_t length = system.headers[index].msg_len;  // whole (MSG_TRUNC asked)
    message.size = std::min(length, m_messageLimit);           // what the buffer holds
    message.segmentSize = 0;
    message.dropped = false;
    std::memcpy(message.from.data(), &system.names[index],
                std::min<std::size_t>(header.msg_namelen, message.from.capacity()));
    message.from.resize(header.msg_namelen);
    if (m_receiveOffload) {
      for (const cmsghdr* control = CMSG_FIRSTHDR(&header); control != nullptr;
           control = CMSG_NXTHDR(const_cast<msghdr*>(&header), const_cast<cmsghdr*>(control))) {
        if (control->cmsg_level == SOL_UDP && control->cmsg_type == UDP_GRO) {
          int segmentSize = 0;
          std::memcpy(&segmentSize, CMSG_DATA(control), sizeof segmentSize);
          if (segmentSize > 0 && static_cast<std::size_t>(segmentSize) < length) {
            message.segmentSize = static_cast<std::size_t>(segmentSize);
            ++m_counters.coalescedMessages;
          }
        }
      }
    }
    if ((header.msg_flags & MSG_TRUNC) != 0 || length > message.size) {
      // Cut short: never handed on as if whole. Of a GRO buffer, the datagrams that fit whole
      // are good; the rest are lost. One datagram alone is lost.
      const std::size_t step = message.segmentSize != 0 ? message.segmentSize : length;
      const std::size_t whole = message.size / step;
      m_counters.truncatedDatagrams += (length + step - 1) / step - whole;
      message.size = whole * step;
      message.dropped = whole == 0;
    }
  }
  m_received = static_cast<std::size_t>(received);
  return m_received;
#endif
}

}  // namespace timerwheel::udp
