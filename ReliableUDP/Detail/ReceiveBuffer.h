// The receiving half of a connection's byte stream: reassembly and message extraction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ReliableUDP/Detail/ChunkPool.h"
#include "ReliableUDP/Detail/RangeSet.h"
#include "ReliableUDP/Detail/VectorQueue.h"

namespace timerwheel::rudp::detail {

// Messages are framed in the stream as a QUIC varint length followed by that many bytes.
// Bytes may arrive in any order and more than once; each offset is stored once, and only offsets
// below ConsumedOffset() + window are accepted (the flow-control limit this side advertises).
//
//   [0 .. ConsumedOffset)            delivered to the application and freed
//   [ConsumedOffset .. ContiguousEnd) received in order, waiting to be read as messages
//   above ContiguousEnd               received out of order (tracked in a RangeSet, bounded)
//
// Memory: bytes live in the pool's chunks (the endpoint gives receive buffers small ones, 1 KiB),
// taken lazily where bytes arrive and given back as soon as they are read, so what a connection
// holds is proportional to the bytes it holds: at most the bytes plus one chunk per edge of each
// out-of-order range. Budgets bound it, counted in whole chunks, `endpointBudget` for the whole
// pool and `connectionBudget` for this buffer:
//   - data that extends the contiguous prefix may fill the pool up to endpointBudget (and is
//     exempt from connectionBudget: the window bounds it, and refusing it could stall a message
//     forever);
//   - out-of-order data is stored only within connectionBudget and while the pool stays within
//     half of endpointBudget (OutOfOrderEndpointBudget).
// Out-of-order data needs a share of its own because it may never become contiguous (a hostile
// peer never sends its gaps, and PINGs to stay alive) and, once acknowledged, can never be
// discarded: without the share, two such connections held the whole budget and every other
// connection's in-order data, and so its progress, was refused until it timed out. With it,
// out-of-order data never holds more than half the budget, and in-order data, a retransmission
// filling a gap included, is refused only once in-order data (at most a window per connection,
// freed as the application reads) fills the rest. Half, because out-of-order data only saves
// retransmissions while in-order data is what makes progress, and splitting evenly leaves each
// as much as the other at any budget. The share is checked against the whole pool, not against
// the out-of-order bytes alone: nothing has to track which chunk holds which kind, and above half
// the budget the endpoint is under pressure, where in-order data should go first (as TCP prunes
// its out-of-order queue first). Data over a budget is refused (InsertResult::OverBudget)
// before anything is stored, so its packet goes unacknowledged and the peer sends it again
// later: nothing is acknowledged and then lost.
//
// Not thread-safe (the endpoint's lock guards it).
class ReceiveBuffer {
 public:
  static constexpr std::size_t kUnlimited = ~std::size_t{0};
  static constexpr std::size_t kDefaultMaxOutOfOrderRanges = 256;

  // window: the most bytes buffered at once; must be >= maxMessageSize + 8 so that any message
  // fits. maxOutOfOrderRanges bounds the reassembly bookkeeping. Budgets in bytes (see above).
  ReceiveBuffer(ChunkPool& pool, std::size_t window, std::size_t maxMessageSize,
                std::size_t maxOutOfOrderRanges = kDefaultMaxOutOfOrderRanges,
                std::size_t connectionBudget = kUnlimited,
                std::size_t endpointBudget = kUnlimited) noexcept;
  ~ReceiveBuffer();
  ReceiveBuffer(const ReceiveBuffer&) = delete;
  ReceiveBuffer& operator=(const ReceiveBuffer&) = delete;

  enum class InsertResult {
    Ok,             // stored (possibly nothing new: a duplicate)
    BeyondWindow,   // some byte at or above Limit(): the peer broke flow control (protocol error)
    TooFragmented,  // would exceed maxOutOfOrderRanges: dropped, the peer will resend
    OverBudget,     // would exceed a memory budget: dropped (nothing stored), the peer will resend
  };
  InsertResult Insert(std::uint64_t offset, const std::uint8_t* data, std::size_t size);

  enum class ReadResult {
    Message,          // `out` holds the next whole message (resized, capacity reused)
    NeedMore,         // no whole message yet
    MessageTooLarge,  // the next length prefix exceeds maxMessageSize (protocol error)
  };
  ReadResult ReadMessage(std::vector<std::uint8_t>& out);

  std::uint64_t ConsumedOffset() const noexcept { return m_consumed; }
  std::uint64_t ContiguousEnd() const noexcept { return m_contiguousEnd; }
  // The highest offset (exclusive) the peer may send now: ConsumedOffset() + window.
  std::uint64_t Limit() const noexcept { return m_consumed + m_window; }
  std::uint64_t HighestReceived() const noexcept { return m_highest; }  // exclusive end
  // Pool memory this buffer holds now (whole chunks), and the bytes stored in it.
  std::size_t MemoryHeld() const noexcept { return m_chunksHeld * m_pool.ChunkSize(); }
  std::uint64_t BytesHeld() const noexcept;
  // The most pool memory (all buffers together) with which out-of-order data is still stored.
  std::size_t OutOfOrderEndpointBudget() const noexcept { return m_endpointBudget / 2; }

  // When everything received was consumed: gives back the bookkeeping's high-water capacity.
  void ReleaseIdleMemory();

 private:
  ChunkPool& m_pool;
  std::size_t m_window;
  std::size_t m_maxMessageSize;
  std::size_t m_maxOutOfOrderRanges;
  std::size_t m_connectionBudget;
  std::size_t m_endpointBudget;
  std::size_t m_chunksHeld = 0;
  // null where nothing was received yet. Not std::deque: libstdc++ allocates ~600 B for an empty
  // deque.
  VectorQueue<std::uint8_t*> m_chunks;
  std::uint64_t m_chunkBase = 0;
  std::uint64_t m_consumed = 0;
  std::uint64_t m_contiguousEnd = 0;
  std::uint64_t m_highest = 0;
  RangeSet m_outOfOrder;
};

}  // namespace timerwheel::rudp::detail
