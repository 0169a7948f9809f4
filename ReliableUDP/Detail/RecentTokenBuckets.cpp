// RecentTokenBuckets: per-source token buckets, only for sources that took a token lately.
#include "ReliableUDP/Detail/RecentTokenBuckets.h"

#include <algorithm>
#include <cassert>

#include "ReliableUDP/Detail/ShrinkCapacity.h"

namespace timerwheel::rudp::detail {

RecentTokenBuckets::RecentTokenBuckets(std::uint64_t perSecond, std::size_t capacity)
    : m_perSecond((std::max)(perSecond, std::uint64_t{1})),
      m_capacity((std::min)((std::max)(capacity, std::size_t{1}), kMaxCapacity)),
      m_index(MakePeerKeyedMap<std::uint64_t, std::uint32_t>()) {}

bool RecentTokenBuckets::HasToken(std::uint64_t source, Microseconds now) {
  const auto found = m_index.find(source);
  return found == m_index.end() || m_entries[found->second].bucket.Available(now);
}

bool RecentTokenBuckets::Take(std::uint64_t source, Microseconds now) {
  std::uint32_t index = kNone;
  const auto found = m_index.find(source);
  if (found != m_index.end()) {
    index = found->second;
    if (!m_entries[index].bucket.TryTake(now)) return false;
    Unlink(index);
  } else {
    if (m_entries.size() >= m_capacity) {
      // The least recently used entry: stale whenever the caller's guarantee holds.
      if (m_oldest == kNone || !m_entries[m_oldest].bucket.Full(now)) return false;
      Remove(m_oldest);  // decides as no entry would: forgetting it changes nothing that counts
    }
    index = static_cast<std::uint32_t>(m_entries.size());
    m_entries.push_back(Entry{source, TokenBucket(m_perSecond)});  // a full bucket
    try {
      m_index.emplace(source, index);
    } catch (...) {
      m_entries.pop_back();
      throw;
    }
    m_entries[index].bucket.TryTake(now);  // a full bucket has a token
  }
  LinkNewest(index);
  ForgetStale(now);  // never the entry just taken: its bucket is not full
  return true;
}

void RecentTokenBuckets::ForgetStale(Microseconds now) noexcept {
  std::size_t forgotten = 0;
  while (forgotten < kForgetPerCall && m_oldest != kNone && m_entries[m_oldest].bucket.Full(now)) {
    Remove(m_oldest);
    ++forgotten;
  }
  if (forgotten > 0) ShrinkAfterBurst();
}

void RecentTokenBuckets::Unlink(std::uint32_t index) noexcept {
  Entry& entry = m_entries[index];
  if (entry.older != kNone) {
    m_entries[entry.older].newer = entry.newer;
  } else {
    m_oldest = entry.newer;
  }
  if (entry.newer != kNone) {
    m_entries[entry.newer].older = entry.older;
  } else {
    m_newest = entry.older;
  }
  entry.older = entry.newer = kNone;
}

void RecentTokenBuckets::LinkNewest(std::uint32_t index) noexcept {
  Entry& entry = m_entries[index];
  entry.older = m_newest;
  entry.newer = kNone;
  if (m_newest != kNone) {
    m_entries[m_newest].newer = index;
  } else {
    m_oldest = index;
  }
  m_newest = index;
}

void RecentTokenBuckets::Remove(std::uint32_t index) noexcept {
  Unlink(index);
  m_index.erase(m_entries[index].source);
  const auto last = static_cast<std::uint32_t>(m_entries.size() - 1);
  if (index != last) {
    // The last entry fills the hole, so that the vector stays dense: its neighbours and its map
    // entry learn its new place (a lookup, no allocation).
    Entry& moved = m_entries[index];
    moved = m_entries[last];
    const auto entry = m_index.find(moved.source);
    assert(entry != m_index.end());
    entry->second = index;
    if (moved.older != kNone) {
      m_entries[moved.older].newer = index;
    } else {
      m_oldest = index;
    }
    if (moved.newer != kNone) {
      m_entries[moved.newer].older = index;
    } else {
      m_newest = index;
    }
  }
  m_entries.pop_back();
}

void RecentTokenBuckets::ShrinkAfterBurst() noexcept {
  // Neither container gives memory back by itself: rebuilt smaller once four times emptier.
  if (m_entries.capacity() > 4 * m_entries.size() + 64) ShrinkCapacity(m_entries);
  ShrinkMapIfSparse(m_index);
}

}  // namespace timerwheel::rudp::detail
