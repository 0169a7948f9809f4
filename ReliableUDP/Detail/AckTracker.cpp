// AckTracker: received packet numbers as ranges, and the RFC 9000 13.2 policy for sending ACKs.
#include "ReliableUDP/Detail/AckTracker.h"

namespace timerwheel::rudp::detail {

namespace {
// RFC 9000 13.2.2: acknowledge at least every second ack-eliciting packet.
constexpr unsigned kAckElicitingThreshold = 2;
// Up to this many ranges the set grows as it needs (see OnPacketReceived).
constexpr std::size_t kSmallRangeCount = 4;
}  // namespace

AckTracker::AckTracker(Microseconds maxAckDelay) noexcept : m_maxAckDelay(maxAckDelay) {}

bool AckTracker::OnPacketReceived(PacketNumber pn, bool ackEliciting, Microseconds now) {
  // m_floor is exclusive: it is the end of the highest range forgotten, so pn == m_floor was a
  // hole and may still arrive.
  if (pn < m_floor || m_received.Contains(pn)) {
    ++m_duplicates;
    return false;
  }

  // RFC 9000 13.2.1: an ack-eliciting packet that arrives out of order (below the largest, or
  // leaving a gap above it) is acknowledged at once, so the peer detects loss (or reordering)
  // quickly. Before anything arrived, the next expected number is the floor (0).
  const PacketNumber expected = m_anyReceived ? m_largest + 1 : m_floor;
  if (ackEliciting && pn != expected) m_ackNow = true;

  if (pn < m_reportFrom) m_reportFrom = pn;  // the peer must hear of it (see OnAckAcknowledged)
  m_received.Insert(pn, pn + 1);
  // Once there are a few gaps (losses, or numbers the peer skipped on purpose), make room for
  // every range at once: the set then never reallocates, however the gaps come. Not at the first
  // gap: an idle connection, whose peer skips a number every few minutes, would hold room for 33
  // ranges (528 bytes) to use two or three.
  if (m_received.RangeCount() > kSmallRangeCount) m_received.Reserve(kMaxAckRanges + 1);
  if (!m_anyReceived || pn > m_largest) {
    m_largest = pn;
    m_largestArrival = now;
  }
  m_anyReceived = true;
  m_anythingToAck = true;

  if (ackEliciting) {
    ++m_unackedElicitingCount;
    if (m_unackedElicitingCount >= kAckElicitingThreshold) m_ackNow = true;
    if (!m_hasDeadline) {
      m_deadline = now + m_maxAckDelay;  // RFC 9000 13.2.1: max_ack_delay
      m_hasDeadline = true;
    }
  }

  // Bounded memory: an ACK frame carries at most kMaxAckRanges ranges, so older ones are
  // forgotten and everything below them counts as received (a very late packet there is
  // dropped as a duplicate; its data is retransmitted anyway once the peer declares it lost).
  while (m_received.RangeCount() > kMaxAckRanges) {
    m_floor = m_received.Front().end;
    m_received.PopFront();
  }
  return true;
}

void AckTracker::OnDuplicate() noexcept {
  // The peer retransmitted or probed with something we have: our ACK was probably lost.
  if (!m_anyReceived) return;
  m_ackNow = true;
  m_anythingToAck = true;
}

void AckTracker::RequestImmediateAck() noexcept {
  if (m_anythingToAck) m_ackNow = true;
}

bool AckTracker::AckNow() const noexcept { return m_ackNow; }

std::optional<Microseconds> AckTracker::AckDeadline() const noexcept {
  if (!m_hasDeadline) return std::nullopt;
  return m_deadline;
}

bool AckTracker::HasAnythingToAck() const noexcept { return m_anythingToAck; }

bool AckTracker::BuildAck(Microseconds now, AckFrame& frame) const noexcept {
  if (!m_anyReceived || m_received.Empty()) return false;
  const std::size_t count = m_received.RangeCount();
  const std::size_t most = count < kMaxAckRanges ? count : kMaxAckRanges;
  std::size_t used = 0;
  // The newest range always; older ones while they reach m_reportFrom.
  while (used < most && (used == 0 || m_received[count - 1 - used].end > m_reportFrom)) {
    const RangeSet::Range& range = m_received[count - 1 - used];
    frame.ranges[used++] = AckRange{range.begin, range.end - 1};  // half-open to inclusive
  }
  frame.rangeCount = used;
  frame.largest = frame.ranges[0].largest;
  // RFC 9000 13.2.5: the delay is measured from the arrival of the largest acknowledged.
  frame.ackDelayMicroseconds = now > m_largestArrival ? now - m_largestArrival : 0;
  return true;
}

void AckTracker::OnAckAcknowledged(PacketNumber largest) noexcept {
  if (largest + 1 > m_reportFrom) m_reportFrom = largest + 1;
}

void AckTracker::ReleaseIdleMemory() {
  // Every gap below m_reportFrom was in an ACK frame the peer received, so it has declared
  // those packets lost (or skipped their numbers on purpose) and resent what they carried. On a
  // quiet connection none of them is still on its way: forgetting the gaps loses only the late
  // arrival that would show a loss was spurious. Without this an idle server connection, which
  // has no keepalive expiry of its own, gains a range per number its client skips (one every
  // few hours) and, from the fifth, holds room for every range it may keep (issue 18: 1,761 B
  // per connection after five hours idle, against 1,250 B after a minute).
  const std::size_t count = m_received.RangeCount();
  std::size_t folded = 0;
  while (count - folded > kSmallRangeCount && m_received[folded].end <= m_reportFrom) ++folded;
  if (folded > 0) {
    m_floor = m_received[folded - 1].end;
    m_received.EraseBelow(m_floor);  // the folded ranges, in one move of the rest
  }
  if (m_received.RangeCount() <= kSmallRangeCount && m_received.Capacity() > kSmallRangeCount) {
    m_received.ShrinkToFit();
  }
}

void AckTracker::OnAckSent() noexcept {
  m_ackNow = false;
  m_hasDeadline = false;
  m_unackedElicitingCount = 0;
  m_anythingToAck = false;
}

}  // namespace timerwheel::rudp::detail
