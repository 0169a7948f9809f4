#include "ReliableUDP/Detail/RetiredHandshakes.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <new>
#include <utility>

#include "ReliableUDP/Detail/RoomForOne.h"
#include "ReliableUDP/Detail/ShrinkCapacity.h"

namespace timerwheel::rudp::detail {

void RetiredHandshakes::Reserve() {
  const std::size_t rooms = m_set.size() + m_spareNodes.size() + 1;
  // Each step either fails and changes nothing, or only grows a capacity (geometrically: a reserve
  // of the exact size would copy the whole vector at every new peak of a burst of accepts).
  MakeRoomForOne(m_spareNodes);
  MakeRoomFor(m_byExpiry, rooms);
  // Strictly under the load limit: libstdc++ may rehash an insert that reaches it exactly.
  if (static_cast<double>(rooms) >=
      static_cast<double>(m_set.max_load_factor()) * static_cast<double>(m_set.bucket_count())) {
    m_set.reserve(2 * rooms);
  }
  // A node of the set's own type: any value the set does not hold, inserted (no rehash: the
  // buckets are reserved) and taken straight out again.
  std::uint64_t placeholder = 0;
  while (m_set.count(placeholder) != 0) ++placeholder;
  m_spareNodes.push_back(m_set.extract(m_set.insert(placeholder).first));
}

void RetiredHandshakes::Unreserve() noexcept {
  assert(!m_spareNodes.empty());
  m_spareNodes.pop_back();
}

void RetiredHandshakes::Add(std::uint64_t handshake, Microseconds expiresAt) noexcept {
  assert(!m_spareNodes.empty());
  Set::node_type node = std::move(m_spareNodes.back());
  m_spareNodes.pop_back();
  if (m_set.count(handshake) != 0) return;  // a 64-bit keyed-hash collision: already held
  node.value() = handshake;
  m_set.insert(std::move(node));                      // into reserved buckets: no allocation
  m_byExpiry.push_back(Entry{expiresAt, handshake});  // within the reserved capacity
  std::push_heap(m_byExpiry.begin(), m_byExpiry.end(), std::greater<>());
}

void RetiredHandshakes::Expire(Microseconds now) {
  const std::size_t before = m_set.size();
  while (!m_byExpiry.empty() && m_byExpiry.front().expiresAt <= now) {
    std::pop_heap(m_byExpiry.begin(), m_byExpiry.end(), std::greater<>());
    m_set.erase(m_byExpiry.back().handshake);
    m_byExpiry.pop_back();
  }
  if (m_set.size() == before) return;
  // Neither container gives memory back by itself: rebuilt smaller once four times emptier
  // (amortised O(1) per entry), with room still for every reserved Add. A rebuild that runs out
  // of memory leaves the larger container as it was.
  const std::size_t rooms = m_set.size() + m_spareNodes.size();
  if (m_byExpiry.capacity() > 4 * rooms + 64) ShrinkCapacity(m_byExpiry, rooms);
  if (m_spareNodes.capacity() > 4 * m_spareNodes.size() + 64) ShrinkCapacity(m_spareNodes);
  try {
    if (m_set.bucket_count() > 64 && rooms * 4 < m_set.bucket_count()) {
      Set smaller;
      smaller.reserve(rooms);
      smaller.insert(m_set.begin(), m_set.end());
      m_set.swap(smaller);
    }
  } catch (const std::bad_alloc&) {
    return;
  }
}

}  // namespace timerwheel::rudp::detail
