// The record of a connection's sent ack-eliciting packets, in packet-number order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/ProtocolTypes.h"

namespace timerwheel::rudp::detail {

// One sent packet, and what it carried that must arrive reliably. The 64-bit fields first and
// the flags together: every connection keeps a ring of these (64 bytes each).
struct SentPacket {
  PacketNumber packetNumber = 0;
  Microseconds timeSent = 0;
  std::uint64_t streamOffset = 0;
  // The connection's delivery state when it was sent, stamped by the congestion controller for
  // delivery-rate sampling (DeliveryRateSampler); unused by controllers that do not sample.
  std::uint64_t delivered = 0;     // bytes delivered (acknowledged) before it was sent
  Microseconds deliveredTime = 0;  // when `delivered` last grew
  Microseconds firstSentTime = 0;  // send time of the packet whose ACK set `deliveredTime`
  std::uint32_t size = 0;          // bytes on the wire
  std::uint32_t streamSize = 0;    // 0: no STREAM frame
  bool ackEliciting = false;       // carried anything but ACK/padding; only these are in flight
  bool hasMaxData = false;
  bool hasClose = false;
  bool appLimited = false;  // sent while the application, not the network, limited sending
  // Its one ack-eliciting frame is a PING (a keepalive, a liveness PING, a probe of those): a
  // flight of nothing else is probed with a floor under its timeout (LossRecovery).
  bool pingOnly = false;
  // LossRecovery's: the congestion controller was told it was sent (it does not exist yet while a
  // connection has sent nothing but PINGs).
  bool controllerSaw = false;
};

// A ring of records, oldest first, packet numbers ascending with the index. Each record is
// Outstanding until it is acknowledged (Acked) or declared lost (Lost); Lost ones are kept a
// while so that a late ACK can show the loss was spurious. Two hints, lower bounds on the oldest
// Outstanding and the oldest not-yet-Acked packet number, let scans skip the settled front
// (states only move away from Outstanding, and Lost may still become Acked).
//
// Acked records in the middle stay (one Lost or Outstanding record at the front holds every later
// one), so an ACK walk must not step over them one by one: a peer that repeats ranges would make
// each ACK frame cost every record held. Each Acked record links forward to a later record that
// may not be Acked (a union-find "next" structure over absolute sequence numbers, with path
// halving), so NextNotAcked skips any run of Acked records in amortised near-constant time.
//
// Not thread-safe. Complexity: Push amortised O(1) (the ring starts with one record, enough for an
// idle connection's keepalive, doubles, and keeps its capacity while the connection is busy, so a
// warm connection allocates nothing; ReleaseIdleMemory gives it back at a quiet moment, or a
// connection that once had thousands of packets in flight would keep 88 bytes for each of them
// for as long as it lives); LowerBound O(log n); NextNotAcked and MarkAcked amortised
// O(log n) at worst, near O(1) in practice. RecordsVisited() counts the records these touch.
class SentPacketLog {
 public:
  enum class State : std::uint8_t { Outstanding, Acked, Lost };
  struct Record {
    SentPacket packet;
    Microseconds lostTime = 0;  // when it was declared lost (State::Lost)
    // Acked: the sequence number (see m_frontSequence) of a later record that may not be Acked,
    // or one past the newest. Unused otherwise.
    std::uint64_t nextNotAcked = 0;
    State state = State::Outstanding;
  };

  // Beyond this many records, the oldest settled (Acked or Lost) ones are forgotten on Push.
  static constexpr std::size_t kMaxRecords = std::size_t{1} << 16;

  // Room for the next Push (forgetting old settled records or growing the ring): may throw
  // std::bad_alloc, changing nothing; a Push after it does not throw.
  void MakeRoomForOne();
  // `packet.packetNumber` is larger than any pushed before.
  void Push(const SentPacket& packet);

  std::size_t Count() const noexcept { return m_count; }
  Record& At(std::size_t index) noexcept { return m_ring[(m_head + index) & (m_ring.size() - 1)]; }
  const Record& At(std::size_t index) const noexcept {
    return m_ring[(m_head + index) & (m_ring.size() - 1)];
  }
  // The first index whose packet number is >= pn (Count() if none).
  std::size_t LowerBound(PacketNumber pn) const noexcept;
  // The first index >= `index` whose record is not Acked (Count() if none).
  std::size_t NextNotAcked(std::size_t index) noexcept;
  // Sets the record at `index` to Acked (it was not), linking it past itself.
  void MarkAcked(std::size_t index) noexcept;
  // How many records LowerBound, NextNotAcked and AdvanceHints have looked at, plus what callers
  // added with NoteVisits (the ACK-processing cost a test or a benchmark can read).
  std::uint64_t RecordsVisited() const noexcept { return m_visits; }
  void NoteVisits(std::uint64_t count) const noexcept { m_visits += count; }

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
  // At a quiet moment: shrinks the ring to the smallest that holds its records (one record, for
  // an idle connection's keepalive), or leaves it as it is if the smaller ring cannot be made.
  void ReleaseIdleMemory() noexcept;
  std::size_t Capacity() const noexcept { return m_ring.size(); }

 private:
  void PopFront() noexcept;
  Record& AtSequence(std::uint64_t sequence) noexcept {
    return At(static_cast<std::size_t>(sequence - m_frontSequence));
  }

  std::vector<Record> m_ring;  // capacity a power of two (or 0), indexed modulo its size
  // 32 bits: a log holds far fewer records (each is 88 bytes), and every connection has one.
  std::uint32_t m_head = 0;
  std::uint32_t m_count = 0;
  // Every record pushed gets the next sequence number; the front record has m_frontSequence, so
  // index i is sequence m_frontSequence + i (links survive PopFront and the ring's growth).
  std::uint64_t m_frontSequence = 0;
  mutable std::uint64_t m_visits = 0;
  PacketNumber m_firstOutstanding = 0;
  PacketNumber m_firstUnacked = 0;
};

}  // namespace timerwheel::rudp::detail
