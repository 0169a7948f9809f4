// Which packets this side has received, and when it owes the peer an ACK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "ReliableUDP/Detail/ProtocolTypes.h"
#include "ReliableUDP/Detail/RangeSet.h"
#include "ReliableUDP/Detail/WireFormat.h"

namespace timerwheel::rudp::detail {

// ACK policy (RFC 9000 13.2 / RFC 9002): an ACK is sent at once after two ack-eliciting packets,
// or when a packet arrives out of order (below the largest seen, or leaving a gap); otherwise no
// later than maxAckDelay after the first unacknowledged ack-eliciting packet. Packets that are
// not ack-eliciting are acknowledged only alongside something else.
//
// Memory is bounded: at most kMaxAckRanges ranges are remembered; the oldest fall below a floor
// (the end of the highest range forgotten) and anything below it counts as a duplicate.
// Not thread-safe.
class AckTracker {
 public:
  explicit AckTracker(Microseconds maxAckDelay) noexcept;

  // False (and nothing changes) if pn was already received or is below the floor: the
  // caller drops the packet as a duplicate/replay (but it should still ACK if ack-eliciting, so
  // a peer whose ACK was lost learns it arrived: see OnDuplicate).
  bool OnPacketReceived(PacketNumber pn, bool ackEliciting, Microseconds now);
  // A duplicate ack-eliciting packet: ask for an immediate ACK.
  void OnDuplicate() noexcept;

  // Acknowledge what is pending at once (a PING alone, a CLOSE): no delayed-ACK timer for it.
  void RequestImmediateAck() noexcept;

  bool AckNow() const noexcept;  // send an ACK in the next packet, now
  std::optional<Microseconds> AckDeadline()
      const noexcept;                      // the delayed-ACK deadline, if one runs
  bool HasAnythingToAck() const noexcept;  // something received not yet acked

  // Fills `frame` (ranges descending, at most kMaxAckRanges; delay = now - arrival of the largest).
  // False if nothing was ever received.
  bool BuildAck(Microseconds now, AckFrame& frame) const noexcept;
  // An ACK was put in a packet: clears AckNow, the deadline and the counters.
  void OnAckSent() noexcept;
  // The peer acknowledged a packet that carried our ACK frame up to `largest` (RFC 9000
  // 13.2.4): it knows which packets up to there arrived, so later ACK frames leave out the
  // ranges wholly at or below `largest`. Without this, every gap (a loss, or a number the peer
  // skipped on purpose) stays in every ACK frame until kMaxAckRanges pushes it out. The ranges
  // are still remembered (duplicates are still found), and a late packet below (one the peer
  // declared lost) brings them back into the report, so the peer learns the loss was spurious.
  void OnAckAcknowledged(PacketNumber largest) noexcept;
  // A quiet moment (the peer's keepalive, nothing in flight): the ranges the peer has seen
  // acknowledged, beyond the newest few, are folded into the floor, and the room the set no
  // longer needs is given back. A busy connection keeps its room, so it never reallocates.
  void ReleaseIdleMemory();

  std::uint64_t DuplicatesDropped() const noexcept { return m_duplicates; }
  // When the packet with the largest number so far arrived (0 before any).
  Microseconds LargestArrival() const noexcept { return m_largestArrival; }

 private:
  // Adds pn (not yet received, at or above the floor) to the ranges.
  void Record(PacketNumber pn);
  // Ranges remembered: m_older's and the newest.
  std::size_t RangeCount() const noexcept { return m_older.RangeCount() + (m_anyReceived ? 1 : 0); }
  // m_older changed at its top: m_olderEnd follows.
  void SyncOlderEnd() noexcept { m_olderEnd = m_older.Empty() ? 0 : m_older.Back().end; }

  Microseconds m_maxAckDelay;
  // The received numbers: the newest range, [m_newestBegin, m_newestEnd), is kept here and the
  // older ones in m_older (ascending, below the newest and not adjacent to it). Packets that
  // arrive in order only extend the newest range, and an ACK whose older ranges the peer has
  // already seen (m_olderEnd <= m_reportFrom) reads only it, so neither touches m_older's heap
  // block: on a server with a thousand busy connections that block was a cache miss on every
  // packet and every ACK (issue 19). The largest received is m_newestEnd - 1.
  PacketNumber m_newestBegin = 0;
  PacketNumber m_newestEnd = 0;
  PacketNumber m_olderEnd = 0;  // the end of m_older's highest range, 0 if it has none
  RangeSet m_older;
  PacketNumber m_floor = 0;       // everything below is treated as received
  PacketNumber m_reportFrom = 0;  // ACK frames leave out the ranges wholly below
  Microseconds m_largestArrival = 0;
  unsigned m_unackedElicitingCount = 0;
  bool m_anyReceived = false;
  bool m_ackNow = false;
  bool m_anythingToAck = false;
  bool m_hasDeadline = false;  // a delayed-ACK deadline runs: m_deadline
  Microseconds m_deadline = 0;
  std::uint64_t m_duplicates = 0;
};

}  // namespace timerwheel::rudp::detail
