// SendBuffer: unacknowledged stream bytes in pool chunks, with acked and lost byte ranges.
#include "ReliableUDP/Detail/SendBuffer.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <new>

namespace timerwheel::rudp::detail {

namespace {

constexpr std::uint64_t kChunk = ChunkPool::kChunkSize;

}  // namespace

SendBuffer::SendBuffer(ChunkPool& pool, std::size_t capacity) noexcept
    : m_pool(pool), m_capacity(capacity) {}

SendBuffer::~SendBuffer() {
  for (std::uint8_t* chunk : m_chunks) m_pool.Release(chunk);
}

std::size_t SendBuffer::FreeSpace() const noexcept {
  const std::uint64_t kept = m_end - m_ackedPrefix;
  return kept >= m_capacity ? 0 : m_capacity - static_cast<std::size_t>(kept);
}

void SendBuffer::AddChunk() {
  m_chunks.MakeRoomForOne();  // first: a chunk acquired must not be lost to a failed push
  m_chunks.Push(m_pool.Acquire());
}

std::size_t SendBuffer::Append(const std::uint8_t* data, std::size_t size) {
  const std::size_t total = std::min(size, FreeSpace());
  // Every chunk was released when everything was acked: restart at the chunk holding m_end.
  if (m_chunks.Empty()) m_chunkBase = m_end - m_end % kChunk;
  std::size_t done = 0;
  while (done < total) {
    const auto index = static_cast<std::size_t>((m_end - m_chunkBase) / kChunk);
    if (index == m_chunks.Size()) {  // lazily, as needed
      try {
        AddChunk();
      } catch (const std::bad_alloc&) {
        // What was copied is in the stream and must be reported, or the caller would copy it
        // again.
        if (done == 0) throw;
        break;
      }
    }
    const auto within = static_cast<std::size_t>(m_end % kChunk);
    const std::size_t n = std::min(total - done, ChunkPool::kChunkSize - within);
    std::memcpy(m_chunks[index] + within, data + done, n);
    done += n;
    m_end += n;
  }
  return done;
}

void SendBuffer::AppendWhole(const std::uint8_t* data, std::size_t size) {
  assert(size <= FreeSpace());
  const std::size_t appended = Append(data, size);  // throws having changed nothing, or copies
  if (appended < size) {
    // A chunk it needed could not be got: the part copied is past what anything has read or
    // sent, so taking back m_end takes it back whole.
    m_end -= appended;
    throw std::bad_alloc();
  }
}

void SendBuffer::Read(std::uint64_t offset, std::size_t size, std::uint8_t* out) const noexcept {
  assert(offset >= m_ackedPrefix && offset + size <= m_end);
  while (size > 0) {
    const auto index = static_cast<std::size_t>((offset - m_chunkBase) / kChunk);
    const auto within = static_cast<std::size_t>(offset % kChunk);
    const std::size_t n = std::min(size, ChunkPool::kChunkSize - within);
    std::memcpy(out, m_chunks[index] + within, n);
    out += n;
    offset += n;
    size -= n;
  }
}

bool SendBuffer::NextToSend(std::size_t maxSize, std::uint64_t flowControlLimit,
                            Range& out) const noexcept {
  if (maxSize == 0) return false;
  if (!m_lost.Empty()) {
    // Retransmissions ignore flow control: the peer already allowed these offsets once.
    const RangeSet::Range& lost = m_lost.Front();
    out.offset = lost.begin;
    out.size = static_cast<std::size_t>(std::min<std::uint64_t>(lost.end - lost.begin, maxSize));
    out.retransmission = true;
    return true;
  }
  const std::uint64_t limit = std::min(m_end, flowControlLimit);
  if (m_nextNew >= limit) return false;
  out.offset = m_nextNew;
  out.size = static_cast<std::size_t>(std::min<std::uint64_t>(limit - m_nextNew, maxSize));
  out.retransmission = false;
  return true;
}

void SendBuffer::OnSent(std::uint64_t offset, std::size_t size) {
  const std::uint64_t end = offset + size;
  assert(end <= m_end);
  assert(offset <= m_nextNew);  // sent bytes are either resent or exactly the next new ones
  if (offset < m_nextNew) m_lost.Erase(offset, std::min(end, m_nextNew));
  if (end > m_nextNew) m_nextNew = std::min(end, m_end);
}

void SendBuffer::OnAcked(std::uint64_t offset, std::size_t size) {
  assert(offset + size <= m_nextNew);  // only sent bytes can be acknowledged
  const std::uint64_t begin = std::max(offset, m_ackedPrefix);
  const std::uint64_t end = std::min(offset + size, m_nextNew);
  if (begin >= end) return;  // empty, or wholly acked already
  m_lost.Erase(begin, end);
  m_acked.Insert(begin, end);
  // m_acked holds only bytes above the prefix and never adjacent ranges, so at most its first
  // range can extend the prefix.
  if (m_acked.Front().begin == m_ackedPrefix) {
    m_ackedPrefix = m_acked.Front().end;
    m_acked.PopFront();
  }

  // Free the chunks wholly below the prefix; when everything is acked, the last partly used one
  // too, so that an idle buffer holds no chunk (Append restarts at the chunk holding m_end).
  std::size_t freed = 0;
  if (m_ackedPrefix == m_end) {
    freed = m_chunks.Size();
  } else {
    while (freed < m_chunks.Size() && m_chunkBase + (freed + 1) * kChunk <= m_ackedPrefix) ++freed;
  }
  if (freed == 0) return;
  for (std::size_t i = 0; i < freed; ++i) m_pool.Release(m_chunks[i]);
  m_chunks.Pop(freed);
  m_chunkBase += freed * kChunk;
}

void SendBuffer::OnLost(std::uint64_t offset, std::size_t size) {
  assert(offset + size <= m_nextNew);  // only sent bytes can be lost
  const std::uint64_t begin = std::max(offset, m_ackedPrefix);
  const std::uint64_t end = std::min(offset + size, m_nextNew);
  if (begin >= end) return;
  // Queue the gaps between the acked ranges inside [begin, end), found by binary search for the
  // first acked range ending above begin. No temporary set: this runs on every loss.
  std::size_t lo = 0;
  std::size_t hi = m_acked.RangeCount();
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (m_acked[mid].end <= begin) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  std::uint64_t cursor = begin;
  for (std::size_t i = lo; i < m_acked.RangeCount() && m_acked[i].begin < end; ++i) {
    if (m_acked[i].begin > cursor) m_lost.Insert(cursor, m_acked[i].begin);
    cursor = std::max(cursor, m_acked[i].end);
  }
  if (cursor < end) m_lost.Insert(cursor, end);
}

bool SendBuffer::QueueOldestForProbe(std::size_t maxSize) {
  if (!m_lost.Empty()) return true;  // something is queued already: the probe resends that
  if (m_ackedPrefix == m_nextNew) return false;
  // Walk the unacked gaps from the prefix upwards (m_acked starts above the prefix) until maxSize
  // bytes are queued.
  std::uint64_t budget = maxSize;
  std::uint64_t cursor = m_ackedPrefix;
  for (std::size_t i = 0; i <= m_acked.RangeCount() && budget > 0 && cursor < m_nextNew; ++i) {
    const std::uint64_t gapEnd = i < m_acked.RangeCount() ? m_acked[i].begin : m_nextNew;
    const std::uint64_t n = std::min(gapEnd - cursor, budget);
    if (n > 0) m_lost.Insert(cursor, cursor + n);
    budget -= n;
    if (i < m_acked.RangeCount()) cursor = m_acked[i].end;
  }
  return true;
}

void SendBuffer::ReleaseIdleMemory() {
  if (m_ackedPrefix != m_end || !m_chunks.Empty()) return;
  m_chunks.ReleaseMemoryIfEmpty();
  m_acked.ShrinkToFit();
  m_lost.ShrinkToFit();
}

}  // namespace timerwheel::rudp::detail
