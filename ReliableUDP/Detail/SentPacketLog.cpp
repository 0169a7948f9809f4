// SentPacketLog: the ring of sent-packet records.
#include "ReliableUDP/Detail/SentPacketLog.h"

#include <algorithm>
#include <new>

namespace timerwheel::rudp::detail {
namespace {

// One record: every connection, idle ones included, has a log (keepalive PINGs are recorded), and
// an idle one has one PING in flight at a time. A busy one doubles it to its high-water mark once.
constexpr std::size_t kInitialCapacity = 1;

}  // namespace

std::size_t SentPacketLog::LowerBound(PacketNumber pn) const noexcept {
  std::size_t low = 0;
  std::size_t high = m_count;
  while (low < high) {
    ++m_visits;
    const std::size_t mid = low + (high - low) / 2;
    if (At(mid).packet.packetNumber < pn) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low;
}

std::size_t SentPacketLog::NextNotAcked(std::size_t index) noexcept {
  const std::uint64_t end = m_frontSequence + m_count;
  std::uint64_t sequence = m_frontSequence + index;
  while (sequence < end) {
    ++m_visits;
    Record& record = AtSequence(sequence);
    if (record.state != State::Acked) break;
    // Path halving: point this record past its successor when that one is Acked too, so the
    // next walk over the same run takes half the steps.
    // (A record set to Acked without MarkAcked has a stale link: it leads at least one on.)
    std::uint64_t next = std::max(record.nextNotAcked, sequence + 1);
    if (next < end) {
      const Record& successor = AtSequence(next);
      if (successor.state == State::Acked) next = std::max(successor.nextNotAcked, next + 1);
    }
    record.nextNotAcked = next;
    sequence = next;
  }
  return static_cast<std::size_t>(std::min(sequence, end) - m_frontSequence);
}

void SentPacketLog::MarkAcked(std::size_t index) noexcept {
  Record& record = At(index);
  record.state = State::Acked;
  record.nextNotAcked = m_frontSequence + index + 1;
}

void SentPacketLog::MakeRoomForOne() {
  // Bound the memory spent on remembering losses: forget the oldest settled records first.
  while (m_count >= kMaxRecords && At(0).state != State::Outstanding) PopFront();
  if (m_count == m_ring.size()) {
    // Grow by doubling, unrolling the ring so that index 0 is the oldest record again.
    std::vector<Record> grown(std::max(kInitialCapacity, m_ring.size() * 2));
    for (std::size_t i = 0; i < m_count; ++i) grown[i] = At(i);
    m_ring.swap(grown);
    m_head = 0;
  }
}

void SentPacketLog::Push(const SentPacket& packet) {
  MakeRoomForOne();
  Record& record = m_ring[(m_head + m_count) & (m_ring.size() - 1)];
  record.packet = packet;
  record.lostTime = 0;
  record.state = State::Outstanding;
  ++m_count;
}

void SentPacketLog::PopFront() noexcept {
  m_head = static_cast<std::uint32_t>((m_head + 1) & (m_ring.size() - 1));
  --m_count;
  ++m_frontSequence;
}

void SentPacketLog::TrimFront(Microseconds now, Microseconds keepLost) noexcept {
  while (m_count > 0) {
    const Record& front = At(0);
    const bool forget = front.state == State::Acked ||
                        (front.state == State::Lost && now >= front.lostTime + keepLost);
    if (!forget) break;
    PopFront();
  }
}

void SentPacketLog::AdvanceHints(PacketNumber nextPacketNumber) noexcept {
  // Both hints only move forward: the records stepped over here are each passed once.
  std::size_t i = LowerBound(m_firstOutstanding);
  while (i < m_count && At(i).state != State::Outstanding) {
    ++m_visits;
    ++i;
  }
  m_firstOutstanding = i < m_count ? At(i).packet.packetNumber : nextPacketNumber;
  i = NextNotAcked(LowerBound(m_firstUnacked));
  m_firstUnacked = i < m_count ? At(i).packet.packetNumber : nextPacketNumber;
}

void SentPacketLog::ReleaseIdleMemory() noexcept {
  std::size_t capacity = kInitialCapacity;
  while (capacity < m_count) capacity *= 2;
  if (m_ring.size() <= capacity) return;
  std::vector<Record> smaller;
  try {
    smaller.resize(capacity);
  } catch (const std::bad_alloc&) {
    return;  // the larger ring stays: nothing lost, and the next quiet moment tries again
  }
  // Unrolled as the growth does: index 0 is the oldest record again. Links are by sequence number.
  for (std::size_t i = 0; i < m_count; ++i) smaller[i] = At(i);
  m_ring.swap(smaller);
  m_head = 0;
}

void SentPacketLog::Clear(PacketNumber nextPacketNumber) noexcept {
  m_frontSequence += m_count;
  m_head = 0;
  m_count = 0;
  m_firstOutstanding = nextPacketNumber;
  m_firstUnacked = nextPacketNumber;
}

}  // namespace timerwheel::rudp::detail
