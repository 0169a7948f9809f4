#include "ReliableUDP/Detail/RetiredHandshakes.h"

#include <algorithm>
#include <functional>

namespace timerwheel::rudp::detail {

void RetiredHandshakes::Add(std::uint64_t handshake, Microseconds expiresAt) {
  if (!m_set.insert(handshake).second) return;  // a 64-bit keyed-hash collision: already held
  m_byExpiry.push_back(Entry{expiresAt, handshake});
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
  // (amortised O(1) per entry).
  if (m_byExpiry.capacity() > 4 * m_byExpiry.size() + 64) m_byExpiry.shrink_to_fit();
  if (m_set.bucket_count() > 64 && m_set.size() * 4 < m_set.bucket_count()) {
    std::unordered_set<std::uint64_t> smaller(m_set.begin(), m_set.end());
    m_set.swap(smaller);
  }
}

}  // namespace timerwheel::rudp::detail
