// AckTracker: the RFC 9000 13.2 ACK policy, duplicate rejection, ACK frames and bounded ranges.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "ReliableUDP/Detail/AckTracker.h"
#include "ReliableUDP/Detail/RangeSet.h"
#include "Support/AllocationCounter.h"

using namespace timerwheel::rudp::detail;
using timerwheel::test::HeapAccount;

namespace {

constexpr Microseconds kMaxAckDelay = 25000;

std::vector<std::vector<PacketNumber>> Ranges(const AckFrame& frame) {
  std::vector<std::vector<PacketNumber>> ranges;
  for (std::size_t i = 0; i < frame.rangeCount; ++i) {
    ranges.push_back({frame.ranges[i].smallest, frame.ranges[i].largest});
  }
  return ranges;
}

}  // namespace

TEST_CASE("AckTracker acks at once after every second ack-eliciting packet", "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  CHECK_FALSE(tracker.HasAnythingToAck());
  REQUIRE(tracker.OnPacketReceived(0, true, 1000));
  CHECK_FALSE(tracker.AckNow());
  CHECK(tracker.HasAnythingToAck());
  REQUIRE(tracker.OnPacketReceived(1, true, 2000));
  CHECK(tracker.AckNow());
  tracker.OnAckSent();
  CHECK_FALSE(tracker.AckNow());
  CHECK_FALSE(tracker.AckDeadline().has_value());
  CHECK_FALSE(tracker.HasAnythingToAck());
  REQUIRE(tracker.OnPacketReceived(2, true, 3000));
  CHECK_FALSE(tracker.AckNow());
  REQUIRE(tracker.OnPacketReceived(3, true, 4000));
  CHECK(tracker.AckNow());
}

TEST_CASE("AckTracker delays an ACK by at most the max ACK delay", "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  CHECK_FALSE(tracker.AckDeadline().has_value());
  REQUIRE(tracker.OnPacketReceived(0, true, 1000));
  CHECK(tracker.AckDeadline() == std::optional<Microseconds>(1000 + kMaxAckDelay));
  tracker.OnAckSent();
  // Not ack-eliciting: no deadline, nothing owed now, but it rides along with the next ACK.
  REQUIRE(tracker.OnPacketReceived(1, false, 2000));
  CHECK_FALSE(tracker.AckDeadline().has_value());
  CHECK_FALSE(tracker.AckNow());
  CHECK(tracker.HasAnythingToAck());
  REQUIRE(tracker.OnPacketReceived(2, true, 3000));
  CHECK(tracker.AckDeadline() == std::optional<Microseconds>(3000 + kMaxAckDelay));
  CHECK_FALSE(tracker.AckNow());
  // The deadline is that of the first unacknowledged ack-eliciting packet.
  REQUIRE(tracker.OnPacketReceived(3, true, 9000));
  CHECK(tracker.AckDeadline() == std::optional<Microseconds>(3000 + kMaxAckDelay));
}

TEST_CASE("AckTracker acks at once on a gap or reordering", "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  REQUIRE(tracker.OnPacketReceived(0, true, 1000));
  tracker.OnAckSent();
  REQUIRE(tracker.OnPacketReceived(2, true, 2000));  // 1 is missing
  CHECK(tracker.AckNow());
  tracker.OnAckSent();
  REQUIRE(tracker.OnPacketReceived(1, true, 3000));  // below the largest
  CHECK(tracker.AckNow());
  tracker.OnAckSent();
  REQUIRE(tracker.OnPacketReceived(3, true, 4000));  // in order again
  CHECK_FALSE(tracker.AckNow());
  tracker.OnAckSent();
  // Out of order but not ack-eliciting: nothing owed at once.
  REQUIRE(tracker.OnPacketReceived(6, false, 5000));
  CHECK_FALSE(tracker.AckNow());
}

TEST_CASE("AckTracker treats a first packet above 0 as a gap", "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  REQUIRE(tracker.OnPacketReceived(1, true, 1000));
  CHECK(tracker.AckNow());
}

TEST_CASE("AckTracker rejects and counts duplicates", "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  REQUIRE(tracker.OnPacketReceived(5, true, 1000));
  tracker.OnAckSent();
  CHECK_FALSE(tracker.OnPacketReceived(5, true, 2000));
  CHECK(tracker.DuplicatesDropped() == 1);
  // Nothing changed: no deadline, no ACK owed until the caller reports the duplicate.
  CHECK_FALSE(tracker.AckNow());
  CHECK_FALSE(tracker.AckDeadline().has_value());
  tracker.OnDuplicate();
  CHECK(tracker.AckNow());
  CHECK(tracker.OnPacketReceived(4, true, 3000));
  CHECK_FALSE(tracker.OnPacketReceived(4, false, 3000));
  CHECK(tracker.DuplicatesDropped() == 2);
}

TEST_CASE("AckTracker builds descending inclusive ranges with the delay of the largest",
          "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  AckFrame frame;
  CHECK_FALSE(tracker.BuildAck(0, frame));
  for (PacketNumber pn : {0, 1, 2, 5, 6, 9, 12}) REQUIRE(tracker.OnPacketReceived(pn, true, 50));
  REQUIRE(tracker.OnPacketReceived(14, true, 100));
  REQUIRE(tracker.OnPacketReceived(13, true, 200));  // arrives after the largest
  REQUIRE(tracker.BuildAck(500, frame));
  CHECK(frame.largest == 14);
  CHECK(frame.ackDelayMicroseconds == 400);
  CHECK(Ranges(frame) == std::vector<std::vector<PacketNumber>>{{12, 14}, {9, 9}, {5, 6}, {0, 2}});
  // Building does not consume anything.
  CHECK(tracker.HasAnythingToAck());
  REQUIRE(tracker.BuildAck(600, frame));
  CHECK(frame.ackDelayMicroseconds == 500);
}

TEST_CASE("AckTracker raises a floor when more than 32 ranges are held", "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  // Even numbers 0..80: 41 single-packet ranges; the lowest 9 ([0]..[16]) are forgotten.
  for (PacketNumber pn = 0; pn <= 80; pn += 2) REQUIRE(tracker.OnPacketReceived(pn, true, pn));
  AckFrame frame;
  REQUIRE(tracker.BuildAck(100, frame));
  REQUIRE(frame.rangeCount == kMaxAckRanges);
  CHECK(frame.ranges[0].largest == 80);
  CHECK(frame.ranges[kMaxAckRanges - 1].smallest == 18);
  CHECK(frame.ranges[kMaxAckRanges - 1].largest == 18);

  // Below the floor (17) everything counts as received, even numbers that never arrived.
  const std::uint64_t duplicates = tracker.DuplicatesDropped();
  CHECK_FALSE(tracker.OnPacketReceived(16, true, 200));
  CHECK_FALSE(tracker.OnPacketReceived(15, true, 200));
  CHECK_FALSE(tracker.OnPacketReceived(1, true, 200));
  CHECK(tracker.DuplicatesDropped() == duplicates + 3);
  // The floor itself was a hole: it may still arrive, and merges with 18.
  CHECK(tracker.OnPacketReceived(17, true, 200));
  REQUIRE(tracker.BuildAck(300, frame));
  CHECK(frame.rangeCount == kMaxAckRanges);
  CHECK(frame.ranges[kMaxAckRanges - 1].smallest == 17);
  CHECK(frame.ranges[kMaxAckRanges - 1].largest == 18);

  // One more hole above: the lowest range goes and the floor moves past it.
  REQUIRE(tracker.OnPacketReceived(100, true, 400));
  REQUIRE(tracker.BuildAck(500, frame));
  CHECK(frame.rangeCount == kMaxAckRanges);
  CHECK(frame.ranges[0].largest == 100);
  CHECK(frame.ranges[kMaxAckRanges - 1].smallest == 20);
  CHECK_FALSE(tracker.OnPacketReceived(18, true, 600));
  CHECK(tracker.OnPacketReceived(19, true, 600));  // the new floor, a hole
}

TEST_CASE("AckTracker leaves out the ranges the peer has seen acknowledged", "[rudp][ack]") {
  AckTracker tracker(kMaxAckDelay);
  // Received 0-2, 4-6, 8-10 (3 and 7 skipped or lost), then 12.
  for (PacketNumber pn : {0, 1, 2, 4, 5, 6, 8, 9, 10, 12}) {
    REQUIRE(tracker.OnPacketReceived(pn, true, 1000));
  }
  AckFrame frame;
  REQUIRE(tracker.BuildAck(2000, frame));
  CHECK(Ranges(frame) == std::vector<std::vector<PacketNumber>>{{12, 12}, {8, 10}, {4, 6}, {0, 2}});
  // The peer acknowledged our packet that carried an ACK up to 10: it knows 0-10.
  tracker.OnAckAcknowledged(10);
  REQUIRE(tracker.BuildAck(2000, frame));
  CHECK(Ranges(frame) == std::vector<std::vector<PacketNumber>>{{12, 12}});
  REQUIRE(tracker.OnPacketReceived(13, true, 3000));
  REQUIRE(tracker.BuildAck(3000, frame));
  CHECK(Ranges(frame) == std::vector<std::vector<PacketNumber>>{{12, 13}});
  // Still remembered: a duplicate below is still refused.
  CHECK_FALSE(tracker.OnPacketReceived(5, true, 3000));
  // A late packet in an old gap (the peer declared it lost) is reported, with what is above it,
  // so the peer finds the loss spurious.
  REQUIRE(tracker.OnPacketReceived(7, true, 4000));
  REQUIRE(tracker.BuildAck(4000, frame));
  CHECK(Ranges(frame) == std::vector<std::vector<PacketNumber>>{{12, 13}, {4, 10}});
  // The newest range is always reported, whatever was acknowledged.
  tracker.OnAckAcknowledged(20);
  REQUIRE(tracker.BuildAck(5000, frame));
  CHECK(Ranges(frame) == std::vector<std::vector<PacketNumber>>{{12, 13}});
}

// Issue 18: an idle server connection gained a range per number its client skipped (one every
// few hours) and, from the fifth, held room for 33 ranges (528 B) for good.
TEST_CASE("AckTracker gives back the room of acknowledged ranges at a quiet moment",
          "[rudp][ack][memory]") {
  HeapAccount heap;
  std::optional<AckTracker> tracker;
  {
    const HeapAccount::Charge charge(&heap);
    tracker.emplace(kMaxAckDelay);
    // Six ranges, 3, 7, 11, 15 and 19 skipped: from the fifth, room for every range at once.
    for (PacketNumber pn = 0; pn <= 22; ++pn) {
      if (pn % 4 != 3) REQUIRE(tracker->OnPacketReceived(pn, true, 1000));
    }
  }
  const std::int64_t busy = heap.Bytes();
  // Room for every range the tracker may hold but the newest, which it keeps in itself.
  CHECK(busy >= std::int64_t(kMaxAckRanges * sizeof(RangeSet::Range)));

  // Nothing acknowledged yet: every range is still owed to the peer, so all stay.
  tracker->ReleaseIdleMemory();
  CHECK(heap.Bytes() == busy);
  AckFrame frame;
  REQUIRE(tracker->BuildAck(2000, frame));
  CHECK(frame.rangeCount == 6);

  // The peer has seen our ACK up to 18: the oldest ranges beyond the newest four fold into the
  // floor (7 now: it was a hole and may still come), and the room goes back.
  tracker->OnAckAcknowledged(18);
  tracker->ReleaseIdleMemory();
  CHECK(heap.Bytes() <= std::int64_t(4 * sizeof(RangeSet::Range)));
  CHECK_FALSE(tracker->OnPacketReceived(3, true, 3000));
  CHECK_FALSE(tracker->OnPacketReceived(5, true, 3000));
  CHECK(tracker->OnPacketReceived(7, true, 3000));
  REQUIRE(tracker->BuildAck(3000, frame));
  CHECK(Ranges(frame) ==
        std::vector<std::vector<PacketNumber>>{{20, 22}, {16, 18}, {12, 14}, {7, 10}});
}

TEST_CASE("AckTracker keeps the ranges the peer has not seen acknowledged, however many",
          "[rudp][ack][memory]") {
  AckTracker tracker(kMaxAckDelay);
  for (PacketNumber pn = 0; pn <= 40; pn += 2) REQUIRE(tracker.OnPacketReceived(pn, true, 1000));
  tracker.OnAckAcknowledged(10);  // [0]..[10] known to the peer, [12]..[40] not
  tracker.ReleaseIdleMemory();
  AckFrame frame;
  REQUIRE(tracker.BuildAck(2000, frame));
  CHECK(frame.rangeCount == 15);  // 12..40
  // Folded: 0..10 (the gaps included); kept: everything from 11 up.
  CHECK_FALSE(tracker.OnPacketReceived(9, true, 2000));
  CHECK(tracker.OnPacketReceived(11, true, 2000));
  CHECK(tracker.OnPacketReceived(13, true, 2000));
}

namespace {

// What AckTracker keeps, written the plain way: every range in one RangeSet, the oldest forgotten
// beyond kMaxAckRanges, ACK frames from the top down to the report line.
class PlainReceivedSet {
 public:
  bool OnPacketReceived(PacketNumber pn) {
    if (pn < m_floor || m_ranges.Contains(pn)) return false;
    if (pn < m_reportFrom) m_reportFrom = pn;
    m_ranges.Insert(pn, pn + 1);
    while (m_ranges.RangeCount() > kMaxAckRanges) {
      m_floor = m_ranges.Front().end;
      m_ranges.PopFront();
    }
    return true;
  }
  void OnAckAcknowledged(PacketNumber largest) {
    if (largest + 1 > m_reportFrom) m_reportFrom = largest + 1;
  }
  std::vector<std::vector<PacketNumber>> Report() const {
    std::vector<std::vector<PacketNumber>> ranges;
    const std::size_t count = m_ranges.RangeCount();
    for (std::size_t used = 0; used < count && used < kMaxAckRanges; ++used) {
      const RangeSet::Range& range = m_ranges[count - 1 - used];
      if (used > 0 && range.end <= m_reportFrom) break;
      ranges.push_back({range.begin, range.end - 1});
    }
    return ranges;
  }

 private:
  RangeSet m_ranges;
  PacketNumber m_floor = 0;
  PacketNumber m_reportFrom = 0;
};

}  // namespace

// AckTracker keeps its newest range apart from the older ones (issue 19: so a packet in order
// and the ACK after it touch no heap block); this checks it still keeps the same numbers.
TEST_CASE("AckTracker agrees with a plain range set under losses and reordering and duplicates",
          "[rudp][ack]") {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    std::mt19937 random(seed);
    AckTracker tracker(kMaxAckDelay);
    PlainReceivedSet plain;
    PacketNumber next = random() % 3;
    std::vector<PacketNumber> held;  // sent but not yet delivered: late, or never
    for (int step = 0; step < 3000; ++step) {
      const std::uint32_t roll = random() % 100;
      PacketNumber pn;
      if (roll < 70 || held.empty()) {
        pn = next++;
        if (random() % 100 < 8) {  // lost for now, or skipped on purpose
          held.push_back(pn);
          continue;
        }
      } else if (roll < 85) {  // a late one
        const std::size_t i = random() % held.size();
        pn = held[i];
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (roll < 95) {  // a duplicate, or a number below what was ever sent
        pn = next == 0 ? 0 : static_cast<PacketNumber>(random() % next);
      } else {  // the peer saw an ACK up to somewhere recent
        if (next == 0) continue;
        const PacketNumber back = std::min<PacketNumber>(random() % 20, next - 1);
        plain.OnAckAcknowledged(next - 1 - back);
        tracker.OnAckAcknowledged(next - 1 - back);
        continue;
      }
      REQUIRE(tracker.OnPacketReceived(pn, true, 1000) == plain.OnPacketReceived(pn));
      AckFrame frame;
      REQUIRE(tracker.BuildAck(1000, frame));
      REQUIRE(Ranges(frame) == plain.Report());
    }
  }
}
