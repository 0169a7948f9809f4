// LinkModel: the fate of each datagram on one direction of an impaired link. Pure: no I/O, no
// clock; the caller says when each datagram arrives and sends the deliveries when they are due.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "Relay/ImpairmentProfile.h"

namespace timerwheel::relay::detail {

// xoshiro256** seeded by splitmix64: the same numbers on every platform and standard library
// (the <random> distributions are not specified bit for bit), so a seed reproduces a run anywhere.
class Random {
 public:
  explicit Random(std::uint64_t seed);
  std::uint64_t Next();
  double Uniform();                         // [0, 1), 53 bits
  bool Bernoulli(double p);                 // false for p <= 0 without drawing
  std::uint64_t UpTo(std::uint64_t bound);  // uniform in [0, bound]

  // splitmix64: derives independent seeds from one (the relay's two directions).
  static std::uint64_t Mix(std::uint64_t value);

 private:
  std::array<std::uint64_t, 4> m_state{};
};

enum class DropCause : std::uint8_t { None, Loss, Burst, Queue };

// The decision for one datagram: dropped (and why), or delivered once or twice.
struct Deliveries {
  DropCause dropped = DropCause::None;
  std::size_t count = 0;             // 0 when dropped, else 1, or 2 when duplicated
  std::array<Microseconds, 2> at{};  // absolute delivery times of the `count` copies
  std::array<bool, 2> reordered{};   // the copy was held back by the reorder delay
  bool corrupted = false;            // the datagram (both copies) had one byte changed
  bool duplicated = false;
};

// The stages, for each datagram arriving at `now` (times in microseconds, any origin far below
// kLatestTime; every time computed saturates there, whatever the profile: ImpairmentProfile.h):
//  1. Loss. Gilbert-Elliott (when burstEnter > 0): the state moves good -> bad with burstEnter,
//     bad -> good with burstExit, then a datagram that finds it bad is lost with burstLoss
//     (DropCause::Burst). Then Bernoulli loss (DropCause::Loss). Lost datagrams cost the link
//     nothing.
//  2. The link (when rateBitsPerSecond > 0): one serializing link, departure =
//     max(now, previous departure) + size * 8 / rate. The backlog is the bytes that have
//     arrived and not yet departed (the one being sent included); a datagram that would make it
//     exceed queueLimitBytes is dropped (DropCause::Queue). Without a rate, departure = now.
//  3. Corruption: one random byte of the datagram, in place, is changed to a different value,
//     before duplication, so both copies carry the same corruption (empty datagrams are never
//     corrupted).
//  4. Duplication, after the link: the copy costs no link capacity.
//  5. Per copy: delivery = departure + delay + a uniform draw in [0, jitter]. With
//     jitterReorders false, delivery = max(that, the latest delivery so far), so the direction
//     stays FIFO (also across SetProfile). Then, with probability `reorder`, the copy is held back
//     by EffectiveReorderDelay() more; a held-back copy does not raise the FIFO floor, so later
//     datagrams overtake it.
// Decisions depend only on the seed, the profiles and the sequence of (now, size) arrivals.
// Random draws are made only for the features a profile turns on.
class LinkModel {
 public:
  LinkModel(const ImpairmentProfile& profile, std::uint64_t seed);

  // Applies to datagrams arriving from now on; the random state, the burst state, the link's
  // backlog and the counters carry over.
  void SetProfile(const ImpairmentProfile& profile);
  const ImpairmentProfile& Profile() const { return m_profile; }

  // Decides the fate of `datagram` arriving at `now` (not before the previous arrival), and may
  // corrupt it in place. `out` is overwritten.
  void OnArrival(Microseconds now, std::vector<std::uint8_t>& datagram, Deliveries& out);

  const LinkCounters& Counters() const { return m_counters; }
  // The bytes waiting for the link (arrived, not departed) as of the last arrival.
  std::size_t BacklogBytes() const { return m_backlogBytes; }

 private:
  // When each datagram admitted to the link departs, in order: a ring buffer whose storage is
  // reused, so a steady state allocates nothing.
  struct Departure {
    double at = 0;
    std::size_t size = 0;
  };
  void ExpireDepartures(Microseconds now);
  void PushDeparture(double at, std::size_t size);
  Microseconds DeliveryTime(Microseconds departure, bool& reordered);

  ImpairmentProfile m_profile;
  Random m_random;
  LinkCounters m_counters;
  bool m_burstBad = false;
  double m_linkFreeAt = 0;  // when the link finishes its last datagram (fractional microseconds)
  std::vector<Departure> m_departures;  // ring buffer: [m_head, m_head + m_count)
  std::size_t m_head = 0;
  std::size_t m_count = 0;
  std::size_t m_backlogBytes = 0;
  Microseconds m_fifoFloor = 0;  // the latest delivery that was not held back
};

}  // namespace timerwheel::relay::detail
