// ChunkPool: a free list of fixed-size byte chunks that grows to its high-water mark.
#include "ReliableUDP/Detail/ChunkPool.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace timerwheel::rudp::detail {

ChunkPool::~ChunkPool() {
  // A chunk still in use would dangle in some buffer once the pool frees it.
  assert(m_inUse == 0);
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
  // has to allocate: it can hold every chunk ever allocated.
  const std::size_t needed = m_allocated.size() + 1;
  if (m_free.capacity() < needed) m_free.reserve(std::max(needed, 2 * m_free.capacity()));
  // Default-initialized, not zeroed: the contents are unspecified and always overwritten.
  std::unique_ptr<std::uint8_t[]> chunk(new std::uint8_t[kChunkSize]);
  m_allocated.push_back(std::move(chunk));
  ++m_inUse;
  return m_allocated.back().get();
}

void ChunkPool::Release(std::uint8_t* chunk) noexcept {
  assert(chunk != nullptr);
  assert(m_inUse > 0);
  --m_inUse;
  m_free.push_back(chunk);  // capacity reserved in Acquire: cannot throw
}

}  // namespace timerwheel::rudp::detail
