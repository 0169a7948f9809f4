// ChunkPool: a free list of fixed-size byte chunks, trimmed to a high-water mark.
#include "ReliableUDP/Detail/ChunkPool.h"

#include <algorithm>
#include <cassert>

namespace timerwheel::rudp::detail {

ChunkPool::ChunkPool(std::size_t chunkSize, std::size_t retainedBytes) noexcept
    : m_chunkSize(chunkSize), m_retainedChunks(retainedBytes / chunkSize) {
  assert(chunkSize > 0);
}

ChunkPool::~ChunkPool() {
  // A chunk still in use would dangle in some buffer once the pool frees it.
  assert(m_inUse == 0);
  for (std::uint8_t* chunk : m_free) delete[] chunk;
}

std::uint8_t* ChunkPool::Acquire() {
  if (!m_free.empty()) {
    // LIFO: the most recently released chunk is the likeliest to still be in cache.
    std::uint8_t* chunk = m_free.back();
    m_free.pop_back();
    ++m_inUse;
    return chunk;
  }
  // Grow the free list's storage now (geometrically) so that Release, which is noexcept, never
  // has to allocate: it can hold every chunk in use. After a burst it is trimmed here too, once
  // it is four times larger than what the high-water mark can ever keep.
  const std::size_t needed = std::max(m_inUse + 1, m_retainedChunks);
  if (m_free.capacity() < needed) {
    m_free.reserve(std::max(needed, 2 * m_free.capacity()));
  } else if (m_free.capacity() > 4 * needed + 64) {
    std::vector<std::uint8_t*>().swap(m_free);  // empty here: nothing to move
    m_free.reserve(needed);
  }
  // Default-initialized, not zeroed: the contents are unspecified and always overwritten.
  auto* chunk = new std::uint8_t[m_chunkSize];
  ++m_inUse;
  return chunk;
}

void ChunkPool::Release(std::uint8_t* chunk) noexcept {
  assert(chunk != nullptr);
  assert(m_inUse > 0);
  --m_inUse;
  // Above the high-water mark the chunk goes back to the system: a pool that kept every chunk of
  // a burst would hold it for good (an attack's memory stayed after its connections closed).
  // Invariant: free chunks <= max(floor, chunks in use / 2), so the pool holds at most 1.5 times
  // its peak use. Each release lowers the mark by at most one, so one more free chunk may have to
  // go as well.
  const std::size_t mark = std::max(m_retainedChunks, m_inUse / 2);
  if (m_free.size() >= mark) {
    delete[] chunk;
    if (m_free.size() > mark) {
      delete[] m_free.back();
      m_free.pop_back();
    }
    return;
  }
  m_free.push_back(chunk);  // capacity reserved in Acquire: cannot throw
}

}  // namespace timerwheel::rudp::detail
