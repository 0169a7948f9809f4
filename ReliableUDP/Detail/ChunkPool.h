// Fixed-size byte chunks shared by every connection of one endpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace timerwheel::rudp::detail {

// Send and receive buffers are lists of chunks taken from here, so an idle connection holds no
// buffer memory and a busy one reuses chunks instead of allocating. Released chunks are kept for
// reuse up to a high-water mark: at most max(retainedBytes, half the bytes in use) of free
// chunks, so a
// steady load allocates nothing while the memory of a burst (many connections, then few) goes
// back to the system. Not thread-safe: the endpoint's lock guards it.
class ChunkPool {
 public:
  static constexpr std::size_t kChunkSize = std::size_t{16} * 1024;
  static constexpr std::size_t kDefaultRetainedBytes = std::size_t{4} << 20;

  explicit ChunkPool(std::size_t chunkSize = kChunkSize,
                     std::size_t retainedBytes = kDefaultRetainedBytes) noexcept;
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;
  ~ChunkPool();  // every chunk must have been released

  std::uint8_t* Acquire();  // ChunkSize() bytes, contents unspecified
  void Release(std::uint8_t* chunk) noexcept;

  std::size_t ChunkSize() const noexcept { return m_chunkSize; }
  std::size_t ChunksInUse() const noexcept { return m_inUse; }
  std::size_t ChunksAllocated() const noexcept { return m_inUse + m_free.size(); }
  std::size_t BytesInUse() const noexcept { return m_inUse * m_chunkSize; }
  std::size_t BytesAllocated() const noexcept { return ChunksAllocated() * m_chunkSize; }

 private:
  std::size_t m_chunkSize;
  std::size_t m_retainedChunks;  // the floor of the high-water mark, in chunks
  std::vector<std::uint8_t*> m_free;
  std::size_t m_inUse = 0;
};

}  // namespace timerwheel::rudp::detail
