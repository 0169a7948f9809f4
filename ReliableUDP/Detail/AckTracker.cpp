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
  const bool received =
      pn < m_floor ||
      (m_anyReceived && (pn >= m_newestBegin ? pn < m_newestEnd : m_older.Contains(pn)));
  if (received) {
    ++m_duplicates;
    return false;
  }

  // RFC 9000 13.2.1: an ack-eliciting packet that arrives out of order (below the largest, or
  // leaving a gap above it) is acknowledged at once, so the peer detects loss (or reordering)
  // quickly. Before anything arrived, the next expected number is the floor (0).
  const PacketNumber expected = m_anyReceived ? m_newestEnd : m_floor;
  if (ackEliciting && pn != expected) m_ackNow = true;

  if (pn < m_reportFrom) m_reportFrom = pn;  // the peer must hear of it (see OnAckAcknowledged)
  if (!m_anyReceived || pn >= m_newestEnd) m_largestArrival = now;
  Record(pn);
  m_anyReceived = true;
  m_anythingToAck = true;
  // Once there are a few gaps (losses, or numbers the peer skipped on purpose), make room for
  // every range at once: the set then never reallocates, however the gaps come. Not at the first
  // gap: an idle connection, whose peer skips a number every few minutes, would hold room for 32
  // ranges (512 bytes) to use two or three. (m_older holds at most kMaxAckRanges: all but the
  // newest, and one more until the loop below forgets the oldest.)
  if (RangeCount() > kSmallRangeCount) m_older.Reserve(kMaxAckRanges);

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
  // (Only m_older's oldest go: its top, m_olderEnd, stays.)
  while (RangeCount() > kMaxAckRanges) {
    m_floor = m_older.Front().end;
    m_older.PopFront();
  }
  return true;
}

void AckTracker::Record(PacketNumber pn) {
  if (!m_anyReceived) {
    m_newestBegin = pn;
    m_newestEnd = pn + 1;
  } else if (pn == m_newestEnd) {  // in order: the common case
    ++m_newestEnd;
  } else if (pn > m_newestEnd) {  // a gap: the newest range becomes the highest older one
    m_older.Insert(m_newestBegin, m_newestEnd);
    m_olderEnd = m_newestEnd;
    m_newestBegin = pn;
    m_newestEnd = pn + 1;
  } else if (pn + 1 == m_newestBegin) {  // late, just below the newest: it grows down
    m_newestBegin = pn;
    if (m_olderEnd == pn && !m_older.Empty()) {  // and now touches the highest older range
      m_newestBegin = m_older.Back().begin;
      m_older.PopBack();
      SyncOlderEnd();
    }
  } else {  // late, in an older gap
    m_older.Insert(pn, pn + 1);
    SyncOlderEnd();
  }
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
  if (!m_anyReceived) return false;
  // The newest range always; older ones (descending) while they reach m_reportFrom.
  frame.ranges[0] = AckRange{m_newestBegin, m_newestEnd - 1};  // half-open to inclusive
  std::size_t used = 1;
  if (m_olderEnd > m_reportFrom) {
    const std::size_t count = m_older.RangeCount();
    const std::size_t most = count + 1 < kMaxAckRanges ? count + 1 : kMaxAckRanges;
    while (used < most && m_older[count - used].end > m_reportFrom) {
      const RangeSet::Range& range = m_older[count - used];
      frame.ranges[used++] = AckRange{range.begin, range.end - 1};
    }
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
  std::size_t folded = 0;
  while (RangeCount() - folded > kSmallRangeCount && m_older[folded].end <= m_reportFrom) {
    ++folded;
  }
  if (folded > 0) {
    m_floor = m_older[folded - 1].end;
    m_older.EraseBelow(m_floor);  // the folded ranges, in one move of the rest
    SyncOlderEnd();
  }
  if (RangeCount() <= kSmallRangeCount && m_older.Capacity() > kSmallRangeCount) {
    m_older.ShrinkToFit();
  }
}

void AckTracker::OnAckSent() noexcept {
  m_ackNow = false;
  m_hasDeadline = false;
  m_unackedElicitingCount = 0;
  m_anythingToAck = false;
}

}  // namespace timerwheel::rudp::detail
