// The sending half of a connection's byte stream: bytes appended, sent, acknowledged, resent.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ReliableUDP/Detail/ChunkPool.h"
#include "ReliableUDP/Detail/RangeSet.h"
#include "ReliableUDP/Detail/VectorQueue.h"

namespace timerwheel::rudp::detail {

// Stream offsets start at 0 and only grow. Bytes in [AckedPrefix(), AppendedEnd()) are kept (in
// pool chunks) until acknowledged; a chunk goes back to the pool once every byte in it is acked.
//
//   [0 ........ AckedPrefix) acked and freed
//   [AckedPrefix .. NextNewOffset) sent at least once: each byte is acked, in flight, or queued for
//                              retransmission (marked lost and not acked since)
//   [NextNewOffset .. AppendedEnd) appended, never sent
//
// Not thread-safe (the endpoint's lock guards it). No allocation in steady state beyond pool chunks
// and the RangeSets' high-water marks.
class SendBuffer {
 public:
  SendBuffer(ChunkPool& pool, std::size_t capacity) noexcept;  // capacity: max unacked bytes kept
  ~SendBuffer();                                               // releases its chunks
  SendBuffer(const SendBuffer&) = delete;
  SendBuffer& operator=(const SendBuffer&) = delete;

  // Copies up to min(size, FreeSpace()) bytes to the end of the stream; returns how many. A chunk
  // it cannot get (no memory) ends the copy there: it returns what it copied, or, if that is
  // nothing, throws std::bad_alloc having changed nothing a reader sees.
  std::size_t Append(const std::uint8_t* data, std::size_t size);
  // All of [data, data + size) (size <= FreeSpace()), or nothing: throws std::bad_alloc if a chunk
  // it needs cannot be got. For what must not be split (a message's length prefix).
  void AppendWhole(const std::uint8_t* data, std::size_t size);
  std::size_t FreeSpace() const noexcept;  // capacity - (AppendedEnd - AckedPrefix)

  // Copies bytes [offset, offset + size) (all within [AckedPrefix, AppendedEnd)) to `out`.
  void Read(std::uint64_t offset, std::size_t size, std::uint8_t* out) const noexcept;

  // The next range to put in a packet: first the lowest queued retransmission, else new data.
  // Limits the range to maxSize bytes and (for new data only) to offsets < flowControlLimit.
  // Returns false if there is nothing to send. Does not change state: call OnSent afterwards.
  struct Range {
    std::uint64_t offset = 0;
    std::size_t size = 0;
    bool retransmission = false;
  };
  bool NextToSend(std::size_t maxSize, std::uint64_t flowControlLimit, Range& out) const noexcept;
  // Records that [offset, offset + size) was put in a packet (removes it from the retransmission
  // queue or advances NextNewOffset).
  void OnSent(std::uint64_t offset, std::size_t size);

  // The packet carrying [offset, offset + size) was acknowledged: marks the bytes acked, removes
  // them from the retransmission queue, frees chunks below the new acked prefix.
  void OnAcked(std::uint64_t offset, std::size_t size);
  // The packet carrying [offset, offset + size) was declared lost: queues for retransmission the
  // bytes of that range that are not acked yet.
  void OnLost(std::uint64_t offset, std::size_t size);
  // Queues the oldest unacknowledged sent bytes (up to maxSize) for retransmission, for a probe
  // (PTO) when nothing is queued; returns false if every sent byte is acked.
  bool QueueOldestForProbe(std::size_t maxSize);

  std::uint64_t AckedPrefix() const noexcept { return m_ackedPrefix; }
  std::uint64_t NextNewOffset() const noexcept { return m_nextNew; }
  std::uint64_t AppendedEnd() const noexcept { return m_end; }
  bool AllAcked() const noexcept { return m_ackedPrefix == m_end; }
  bool HasRetransmissions() const noexcept { return !m_lost.Empty(); }

  // When everything is acknowledged: gives back the bookkeeping's high-water capacity.
  void ReleaseIdleMemory();

 private:
  // Adds the chunk for the bytes after the last one held; may throw std::bad_alloc, changing
  // nothing (the chunk is not lost).
  void AddChunk();

  ChunkPool& m_pool;
  std::size_t m_capacity;
  // m_chunks[0] holds offset m_chunkBase. Not std::deque: libstdc++ allocates ~600 B for an empty
  // deque.
  VectorQueue<std::uint8_t*> m_chunks;
  std::uint64_t m_chunkBase = 0;  // multiple of ChunkPool::kChunkSize
  std::uint64_t m_ackedPrefix = 0;
  std::uint64_t m_nextNew = 0;
  std::uint64_t m_end = 0;
  RangeSet m_acked;  // acked ranges above m_ackedPrefix
  RangeSet m_lost;   // queued for retransmission
};

}  // namespace timerwheel::rudp::detail
