// ReceiveBuffer: reassembles stream bytes in pool chunks and cuts out length-prefixed messages.
#include "ReliableUDP/Detail/ReceiveBuffer.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace timerwheel::rudp::detail {

namespace {

// The number of bytes of a QUIC varint (RFC 9000 section 16), from the top two bits of its first
// byte. Kept here rather than taken from WireFormat so the buffer stands alone.
std::size_t VarIntLength(std::uint8_t firstByte) noexcept {
  return std::size_t{1} << (firstByte >> 6);
}

}  // namespace

ReceiveBuffer::ReceiveBuffer(ChunkPool& pool, std::size_t window, std::size_t maxMessageSize,
                             std::size_t maxOutOfOrderRanges, std::size_t connectionBudget,
                             std::size_t endpointBudget) noexcept
    : m_pool(pool),
      m_window(window),
      m_maxMessageSize(maxMessageSize),
      m_maxOutOfOrderRanges(maxOutOfOrderRanges),
      m_connectionBudget(connectionBudget),
      m_endpointBudget(endpointBudget) {
  // A message and its longest length prefix must fit in the window, or it could never complete.
  assert(maxMessageSize <= window && window - maxMessageSize >= 8);
}

ReceiveBuffer::~ReceiveBuffer() {
  for (std::uint8_t* chunk : m_chunks) {
    if (chunk != nullptr) m_pool.Release(chunk);
  }
}

ReceiveBuffer::InsertResult ReceiveBuffer::Insert(std::uint64_t offset, const std::uint8_t* data,
                                                  std::size_t size) {
  if (size == 0) return InsertResult::Ok;
  const std::uint64_t end = offset + size;
  if (end > Limit()) return InsertResult::BeyondWindow;
  if (end <= m_contiguousEnd) return InsertResult::Ok;  // a duplicate of delivered-or-queued bytes
  const std::uint64_t begin = std::max(offset, m_contiguousEnd);

  // The out-of-order ranges that overlap or touch [begin, end) (they merge with it), found by
  // binary search for the first range ending at or above begin.
  std::size_t first = 0;
  std::size_t hi = m_outOfOrder.RangeCount();
  while (first < hi) {
    const std::size_t mid = first + (hi - first) / 2;
    if (m_outOfOrder[mid].end < begin) {
      first = mid + 1;
    } else {
      hi = mid;
    }
  }
  const bool touchesExisting =
      first < m_outOfOrder.RangeCount() && m_outOfOrder[first].begin <= end;
  // Only a range that neither extends the contiguous prefix nor merges with another adds one.
  if (begin != m_contiguousEnd && !touchesExisting &&
      m_outOfOrder.RangeCount() >= m_maxOutOfOrderRanges) {
    return InsertResult::TooFragmented;
  }

  // Copy only the bytes not present yet (the gaps between existing ranges): each offset is stored
  // once, so a misbehaving peer cannot rewrite bytes already received.
  const std::uint64_t chunkSize = m_pool.ChunkSize();
  if (m_chunks.Empty()) m_chunkBase = m_consumed - m_consumed % chunkSize;

  // First the budgets: how many chunks the gaps need that are not there yet. Walked by chunk,
  // not by byte: at most window / chunk size steps, and each new chunk is counted once.
  std::size_t newChunks = 0;
  {
    std::uint64_t cursor = begin;
    std::size_t lastCounted = ~std::size_t{0};
    for (std::size_t i = first; cursor < end; ++i) {
      const bool more = i < m_outOfOrder.RangeCount() && m_outOfOrder[i].begin < end;
      const std::uint64_t gapEnd = more ? m_outOfOrder[i].begin : end;
      if (cursor < gapEnd) {
        const auto firstIndex = static_cast<std::size_t>((cursor - m_chunkBase) / chunkSize);
        const auto lastIndex = static_cast<std::size_t>((gapEnd - 1 - m_chunkBase) / chunkSize);
        for (std::size_t index = firstIndex; index <= lastIndex; ++index) {
          if (index == lastCounted) continue;
          lastCounted = index;
          if (index >= m_chunks.Size() || m_chunks[index] == nullptr) ++newChunks;
        }
      }
      if (!more) break;
      cursor = std::max(cursor, m_outOfOrder[i].end);
    }
  }
  if (newChunks > 0) {
    const std::size_t newBytes = newChunks * static_cast<std::size_t>(chunkSize);
    const std::size_t poolAfter = m_pool.BytesInUse() + newBytes;
    if (begin == m_contiguousEnd) {
      // In-order data may use the whole endpoint budget: the out-of-order share below keeps half
      // of it out of reach of data that may never become contiguous.
      if (poolAfter > m_endpointBudget) return InsertResult::OverBudget;
    } else if (MemoryHeld() + newBytes > m_connectionBudget ||
               poolAfter > OutOfOrderEndpointBudget()) {
      return InsertResult::OverBudget;
    }
  }

  std::uint64_t cursor = begin;
  for (std::size_t i = first; cursor < end; ++i) {
    const bool more = i < m_outOfOrder.RangeCount() && m_outOfOrder[i].begin < end;
    const std::uint64_t gapEnd = more ? m_outOfOrder[i].begin : end;
    for (std::uint64_t at = cursor; at < gapEnd;) {
      const auto index = static_cast<std::size_t>((at - m_chunkBase) / chunkSize);
      m_chunks.GrowTo(index + 1);
      if (m_chunks[index] == nullptr) {
        m_chunks[index] = m_pool.Acquire();  // lazily, as needed
        ++m_chunksHeld;
      }
      const auto within = static_cast<std::size_t>(at % chunkSize);
      const auto n =
          static_cast<std::size_t>(std::min<std::uint64_t>(gapEnd - at, chunkSize - within));
      std::memcpy(m_chunks[index] + within, data + (at - offset), n);
      at += n;
    }
    if (!more) break;
    cursor = std::max(cursor, m_outOfOrder[i].end);
  }

  m_outOfOrder.Insert(begin, end);
  // Ranges never touch, so at most the first one can extend the contiguous prefix.
  if (m_outOfOrder.Front().begin == m_contiguousEnd) {
    m_contiguousEnd = m_outOfOrder.Front().end;
    m_outOfOrder.PopFront();
  }
  m_highest = std::max(m_highest, end);
  return InsertResult::Ok;
}

ReceiveBuffer::ReadResult ReceiveBuffer::ReadMessage(std::vector<std::uint8_t>& out) {
  const std::uint64_t available = m_contiguousEnd - m_consumed;
  if (available == 0) return ReadResult::NeedMore;
  const std::uint64_t chunkSize = m_pool.ChunkSize();

  // Bytes are reached one at a time for the prefix, which may straddle two chunks.
  const auto byteAt = [this, chunkSize](std::uint64_t at) {
    return m_chunks[static_cast<std::size_t>((at - m_chunkBase) / chunkSize)][at % chunkSize];
  };
  const std::uint8_t firstByte = byteAt(m_consumed);
  const std::size_t prefixLength = VarIntLength(firstByte);
  if (available < prefixLength) return ReadResult::NeedMore;
  std::uint64_t length = firstByte & 0x3f;
  for (std::size_t i = 1; i < prefixLength; ++i) length = (length << 8) | byteAt(m_consumed + i);
  if (length > m_maxMessageSize) return ReadResult::MessageTooLarge;
  if (available - prefixLength < length) return ReadResult::NeedMore;

  out.resize(static_cast<std::size_t>(length));
  std::uint64_t at = m_consumed + prefixLength;
  for (std::size_t done = 0; done < out.size();) {
    const auto within = static_cast<std::size_t>(at % chunkSize);
    const std::size_t n = std::min(out.size() - done, m_pool.ChunkSize() - within);
    std::memcpy(out.data() + done,
                m_chunks[static_cast<std::size_t>((at - m_chunkBase) / chunkSize)] + within, n);
    done += n;
    at += n;
  }
  m_consumed = at;

  // Free the chunks wholly below the consumed offset; when nothing is buffered at all, the partly
  // used one too, so that an idle buffer holds no chunk (Insert restarts at the consumed offset).
  std::size_t freed = 0;
  if (m_consumed == m_contiguousEnd && m_outOfOrder.Empty()) {
    freed = m_chunks.Size();
  } else {
    while (freed < m_chunks.Size() && m_chunkBase + (freed + 1) * chunkSize <= m_consumed) ++freed;
  }
  if (freed > 0) {
    for (std::size_t i = 0; i < freed; ++i) {
      if (m_chunks[i] != nullptr) {
        m_pool.Release(m_chunks[i]);
        --m_chunksHeld;
      }
    }
    m_chunks.Pop(freed);
    m_chunkBase += freed * chunkSize;
  }
  return ReadResult::Message;
}

std::uint64_t ReceiveBuffer::BytesHeld() const noexcept {
  std::uint64_t bytes = m_contiguousEnd - m_consumed;
  for (std::size_t i = 0; i < m_outOfOrder.RangeCount(); ++i) {
    bytes += m_outOfOrder[i].end - m_outOfOrder[i].begin;
  }
  return bytes;
}

void ReceiveBuffer::ReleaseIdleMemory() {
  if (m_consumed != m_contiguousEnd || !m_outOfOrder.Empty() || !m_chunks.Empty()) return;
  m_chunks.ReleaseMemoryIfEmpty();
  m_outOfOrder.ShrinkToFit();
}

}  // namespace timerwheel::rudp::detail
