#include "Relay/Detail/LinkModel.h"

#include <algorithm>
#include <cmath>

namespace timerwheel::relay::detail {
namespace {

// time + span, saturated at kLatestTime (ImpairmentProfile.h); never earlier than time.
Microseconds Later(Microseconds time, Microseconds span) {
  if (time >= kLatestTime) return time;
  return span >= kLatestTime - time ? kLatestTime : time + span;
}

}  // namespace

// Random -------------------------------------------------------------------------------------

std::uint64_t Random::Mix(std::uint64_t value) {
  value += 0x9E3779B97F4A7C15ull;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ull;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBull;
  return value ^ (value >> 31);
}

Random::Random(std::uint64_t seed) {
  for (auto& word : m_state) {
    seed = Mix(seed);
    word = seed;
  }
}

std::uint64_t Random::Next() {
  const auto rotl = [](std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const std::uint64_t result = rotl(m_state[1] * 5, 7) * 9;
  const std::uint64_t t = m_state[1] << 17;
  m_state[2] ^= m_state[0];
  m_state[3] ^= m_state[1];
  m_state[1] ^= m_state[2];
  m_state[0] ^= m_state[3];
  m_state[2] ^= t;
  m_state[3] = rotl(m_state[3], 45);
  return result;
}

double Random::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

bool Random::Bernoulli(double p) { return p > 0 && Uniform() < p; }

std::uint64_t Random::UpTo(std::uint64_t bound) {
  if (bound == ~std::uint64_t{0}) return Next();
  // The modulo bias is below bound / 2^64: invisible for the spans used here.
  return Next() % (bound + 1);
}

// LinkModel ----------------------------------------------------------------------------------

LinkModel::LinkModel(const ImpairmentProfile& profile, std::uint64_t seed)
    : m_profile(profile), m_random(seed) {}

void LinkModel::SetProfile(const ImpairmentProfile& profile) { m_profile = profile; }

void LinkModel::ExpireDepartures(Microseconds now) {
  const double current = static_cast<double>(now);
  while (m_count > 0 && m_departures[m_head].at <= current) {
    m_backlogBytes -= m_departures[m_head].size;
    m_head = (m_head + 1) % m_departures.size();
    --m_count;
  }
  if (m_count == 0) m_head = 0;
}

void LinkModel::PushDeparture(double at, std::size_t size) {
  if (m_count == m_departures.size()) {
    // Full: unroll the ring into a buffer twice the size.
    std::vector<Departure> grown(std::max<std::size_t>(16, 2 * m_departures.size()));
    for (std::size_t i = 0; i < m_count; ++i) {
      grown[i] = m_departures[(m_head + i) % m_departures.size()];
    }
    m_departures.swap(grown);
    m_head = 0;
  }
  m_departures[(m_head + m_count) % m_departures.size()] = Departure{at, size};
  ++m_count;
  m_backlogBytes += size;
}

Microseconds LinkModel::DeliveryTime(Microseconds departure, bool& reordered) {
  Microseconds at = Later(departure, m_profile.delay);
  if (m_profile.jitter > 0) at = Later(at, m_random.UpTo(m_profile.jitter));
  if (!m_profile.jitterReorders) at = std::max(at, m_fifoFloor);
  reordered = m_random.Bernoulli(m_profile.reorder);
  if (reordered) {
    at = Later(at, m_profile.EffectiveReorderDelay());
  } else {
    m_fifoFloor = std::max(m_fifoFloor, at);
  }
  return at;
}

void LinkModel::OnArrival(Microseconds now, std::vector<std::uint8_t>& datagram, Deliveries& out) {
  out = Deliveries{};
  const std::size_t size = datagram.size();
  ++m_counters.in;
  m_counters.bytesIn += size;

  // 1. Loss.
  if (m_profile.burstEnter > 0) {
    m_burstBad = m_burstBad ? !m_random.Bernoulli(m_profile.burstExit)
                            : m_random.Bernoulli(m_profile.burstEnter);
    if (m_burstBad && m_random.Bernoulli(m_profile.burstLoss)) {
      ++m_counters.droppedBurst;
      out.dropped = DropCause::Burst;
      return;
    }
  } else {
    m_burstBad = false;
  }
  if (m_random.Bernoulli(m_profile.loss)) {
    ++m_counters.droppedLoss;
    out.dropped = DropCause::Loss;
    return;
  }

  // 2. The link.
  Microseconds departure = now;
  if (m_profile.rateBitsPerSecond > 0) {
    ExpireDepartures(now);
    if (m_profile.queueLimitBytes > 0 && m_backlogBytes + size > m_profile.queueLimitBytes) {
      ++m_counters.droppedQueue;
      out.dropped = DropCause::Queue;
      return;
    }
    // With a rate below the profile's floor the transmission may be enormous or +infinity; the
    // link's time saturates at kLatestTime (exact as a double), so the conversion below is always
    // in range and the link stays busy for ever.
    const double transmission = static_cast<double>(size) * 8e6 / m_profile.rateBitsPerSecond;
    m_linkFreeAt = std::min(std::max(static_cast<double>(now), m_linkFreeAt) + transmission,
                            static_cast<double>(kLatestTime));
    PushDeparture(m_linkFreeAt, size);
    departure = std::max(now, static_cast<Microseconds>(std::ceil(m_linkFreeAt)));
  } else if (m_count > 0) {
    // The rate was turned off: nothing waits for a link any more.
    m_count = m_head = 0;
    m_backlogBytes = 0;
  }

  // 3. Corruption, in place, before duplication: both copies carry it.
  if (size > 0 && m_random.Bernoulli(m_profile.corrupt)) {
    const auto index = static_cast<std::size_t>(m_random.UpTo(size - 1));
    const auto change = static_cast<std::uint8_t>(1 + m_random.UpTo(254));  // never 0
    datagram[index] = static_cast<std::uint8_t>(datagram[index] ^ change);
    out.corrupted = true;
    ++m_counters.corrupted;
  }

  // 4. Duplication.
  out.duplicated = m_random.Bernoulli(m_profile.duplicate);
  out.count = out.duplicated ? 2 : 1;
  if (out.duplicated) ++m_counters.duplicated;

  // 5. Delay, jitter and reordering, per copy.
  for (std::size_t copy = 0; copy < out.count; ++copy) {
    bool reordered = false;
    out.at[copy] = DeliveryTime(departure, reordered);
    out.reordered[copy] = reordered;
    if (reordered) ++m_counters.reordered;
  }
  m_counters.out += out.count;
  m_counters.bytesOut += out.count * size;
}

}  // namespace timerwheel::relay::detail
