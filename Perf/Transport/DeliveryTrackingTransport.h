// The part every transport under test shares: messages sent against messages delivered, whether
// the connection failed, and Flush, which waits on them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "Transport/ITransportUnderTest.h"

namespace timerwheel::perf {

// Locking: m_mutex guards the counts below and the state each transport marks as shared with it;
// whoever changes any of it notifies m_changed. Send (the benchmark's thread) counts
// m_messagesSent, the server's handler (an I/O thread) m_messagesDelivered, and whichever thread
// sees the connection fail sets m_failed.
class DeliveryTrackingTransport : public ITransportUnderTest {
 public:
  bool Flush(int timeoutMs) final {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_changed.wait_for(lock, std::chrono::milliseconds(timeoutMs),
                       [this] { return m_failed || m_messagesDelivered >= m_messagesSent; });
    return m_messagesDelivered >= m_messagesSent;
  }

 protected:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::uint64_t m_messagesSent = 0;
  std::uint64_t m_messagesDelivered = 0;
  bool m_failed = false;
};

}  // namespace timerwheel::perf
