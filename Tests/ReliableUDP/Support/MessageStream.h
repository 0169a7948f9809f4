// Sends pattern messages over one connection and checks them as they arrive at the other end.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ReliableUDP/Connection.h"
#include "ReliableUDP/Support/MessagePattern.h"

namespace timerwheel::test {

// Messages [0, count) go from `sender` to `receiver`, at most `window` AsyncSends outstanding.
// The receiver checks each message's index order, size and bytes. Handlers may run on any
// thread (a mutex guards the state); OnFinished, if set, is called once when every message has
// arrived or something went wrong. Keep the stream alive until then (handlers hold a weak ref).
class MessageStream : public std::enable_shared_from_this<MessageStream> {
 public:
  using SizeFunction = std::function<std::size_t(std::uint64_t)>;

  MessageStream(
      std::shared_ptr<rudp::Connection> sender, std::shared_ptr<rudp::Connection> receiver,
      std::uint64_t count, SizeFunction size = [](std::uint64_t i) { return PatternSize(i); },
      std::size_t window = 16)
      : m_sender(std::move(sender)),
        m_receiver(std::move(receiver)),
        m_count(count),
        m_size(std::move(size)),
        m_buffers(window) {}

  // True once every message arrived or something failed; false after `timeout`.
  template <class Duration>
  bool WaitFinished(Duration timeout) {
    std::unique_lock<std::mutex> lock(m_mutex);
    return m_finishedChanged.wait_for(lock, timeout, [this] { return m_done.load(); });
  }

  void Start() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      for (std::size_t slot = 0; slot < m_buffers.size() && m_nextToSend < m_count; ++slot) {
        SendNextLocked(slot);
      }
    }
    Receive();
  }

  bool Done() const { return m_done.load(); }
  std::uint64_t Received() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_received;
  }
  std::uint64_t SendsCompleted() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_sendsCompleted;
  }
  std::string Error() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_error;
  }

 private:
  struct Buffer {
    bool active = false;
    std::vector<std::uint8_t> bytes;
  };

  // AsyncSend is called under the mutex so that messages are queued in index order even when
  // a completion on another thread refills a slot while Start is still filling the others
  // (AsyncSend never runs its handler inline, so this cannot deadlock).
  void SendNextLocked(std::size_t slot) {
    const std::uint64_t index = m_nextToSend++;
    m_buffers[slot].bytes = PatternMessage(index, m_size(index));
    m_buffers[slot].active = true;
    std::weak_ptr<MessageStream> weak = weak_from_this();
    m_sender->AsyncSend(boost::asio::buffer(m_buffers[slot].bytes),
                        [weak, slot](boost::system::error_code ec) {
                          if (auto self = weak.lock()) self->OnSent(slot, ec);
                        });
  }

  void OnSent(std::size_t slot, boost::system::error_code ec) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (ec) return FailLocked("send failed: " + ec.message());
    ++m_sendsCompleted;
    m_buffers[slot].active = false;
    if (m_nextToSend < m_count) SendNextLocked(slot);
  }

  void Receive() {
    std::weak_ptr<MessageStream> weak = weak_from_this();
    m_receiver->AsyncReceive(m_incoming, [weak](boost::system::error_code ec) {
      if (auto self = weak.lock()) self->OnReceived(ec);
    });
  }

  void OnReceived(boost::system::error_code ec) {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      if (m_done) return;
      if (ec) {
        return FailLocked("receive failed after " + std::to_string(m_received) +
                          " messages: " + ec.message());
      }
      const std::string problem = CheckPattern(m_incoming, m_received, m_size(m_received));
      if (!problem.empty()) return FailLocked(problem);
      ++m_received;
      if (m_received == m_count) {
        m_done = true;
        m_finishedChanged.notify_all();
        return;
      }
    }
    Receive();
  }

  void FailLocked(std::string problem) {
    if (m_done) return;
    m_error = std::move(problem);
    m_done = true;
    m_finishedChanged.notify_all();
  }

  std::shared_ptr<rudp::Connection> m_sender;
  std::shared_ptr<rudp::Connection> m_receiver;
  const std::uint64_t m_count;
  const SizeFunction m_size;
  mutable std::mutex m_mutex;
  std::condition_variable m_finishedChanged;
  std::vector<Buffer> m_buffers;
  std::uint64_t m_nextToSend = 0;
  std::uint64_t m_sendsCompleted = 0;
  std::uint64_t m_received = 0;
  std::vector<std::uint8_t> m_incoming;
  std::string m_error;
  std::atomic<bool> m_done{false};
};

}  // namespace timerwheel::test
