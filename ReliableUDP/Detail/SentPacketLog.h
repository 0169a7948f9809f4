// The record of a connection's sent ack-eliciting packets, in packet-number order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// One sent packet, and what it carried that must arrive reliably.
struct SentPacket {
  PacketNumber packetNumber = 0;
  Microseconds timeSent = 0;
  std::uint32_t size = 0;     // bytes on the wire
  bool ackEliciting = false;  // carried anything but ACK/padding; only these are in flight
  std::uint64_t streamOffset = 0;
  std::uint32_t streamSize = 0;  // 0: no STREAM frame
  bool hasMaxData = false;
  bool hasClose = false;
  // The connection's delivery state when it was sent, stamped by the congestion controller for
  // delivery-rate sampling (DeliveryRateSampler); unused by controllers that do not sample.
  std::uint64_t delivered = 0;     // bytes delivered (acknowledged) before it was sent
  Microseconds deliveredTime = 0;  // when `delivered` last grew
  Microseconds firstSentTime = 0;  // send time of the packet whose ACK set `deliveredTime`
  bool appLimited = false;         // sent while the application, not the network, limited sending
};

// A ring of records, oldest first, packet numbers ascending with the index. Each record is
// Outstanding until it is acknowledged (Acked) or declared lost (Lost); Lost ones are kept a
// while so that a late ACK can show the loss was spurious. Two hints, lower bounds on the oldest
// Outstanding and the oldest not-yet-Acked packet number, let scans skip the settled front
// (states only move away from Outstanding, and Lost may still become Acked).
//
// Not thread-safe. Complexity: Push amortised O(1) (the ring doubles, and keeps its capacity, so
// a warm connection allocates nothing); LowerBound O(log n).
class SentPacketLog {
 public:
  enum class State : std::uint8_t { Outstanding, Acked, Lost };
  struct Record {
    SentPacket packet;
    Microseconds lostTime = 0;  // when it was declared lost (State::Lost)
    State state = State::Outstanding;
  };

  // Beyond this many records, the oldest settled (Acked or Lost) ones are forgotten on Push.
  static constexpr std::size_t kMaxRecords = std::size_t{1} << 16;

  // `packet.packetNumber` is larger than any pushed before.
  void Push(const SentPacket& packet);

  std::size_t Count() const noexcept { return m_count; }
  Record& At(std::size_t index) noexcept { return m_ring[(m_head + index) & (m_ring.size() - 1)]; }
  const Record& At(std::size_t index) const noexcept {
    return m_ring[(m_head + index) & (m_ring.size() - 1)];
  }
  // The first index whose packet number is >= pn (Count() if none).
  std::size_t LowerBound(PacketNumber pn) const noexcept;

  // Lower bounds on the oldest Outstanding and the oldest not-yet-Acked packet number.
  PacketNumber FirstOutstanding() const noexcept { return m_firstOutstanding; }
  PacketNumber FirstUnacked() const noexcept { return m_firstUnacked; }
  // After states changed: moves both hints past settled records. `nextPacketNumber` (one past the
  // largest sent) is what they become when nothing is left.
  void AdvanceHints(PacketNumber nextPacketNumber) noexcept;
  // Forgets Acked records at the front, and Lost ones declared at least `keepLost` before `now`.
  void TrimFront(Microseconds now, Microseconds keepLost) noexcept;
  // Forgets everything (the connection closed); capacity is kept.
  void Clear(PacketNumber nextPacketNumber) noexcept;

 private:
  void PopFront() noexcept;

  std::vector<Record> m_ring;  // capacity a power of two (or 0), indexed modulo its size
  std::size_t m_head = 0;
  std::size_t m_count = 0;
  PacketNumber m_firstOutstanding = 0;
  PacketNumber m_firstUnacked = 0;
};

}  // namespace timerwheel::rudp::detail
