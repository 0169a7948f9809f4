// Fixed-size byte chunks shared by every connection of one endpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace timerwheel::rudp::detail {

// Send and receive buffers are lists of chunks taken from here, so an idle connection holds no
// buffer memory and a busy one reuses chunks instead of allocating (the pool grows to its
// high-water mark and keeps it). Not thread-safe: the endpoint's lock guards it.
class ChunkPool {
 public:
  static constexpr std::size_t kChunkSize = std::size_t{16} * 1024;

  ChunkPool() = default;
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;
  ~ChunkPool();  // every chunk must have been released

  std::uint8_t* Acquire();  // kChunkSize bytes, contents unspecified
  void Release(std::uint8_t* chunk) noexcept;

  std::size_t ChunksInUse() const noexcept { return m_inUse; }
  std::size_t ChunksAllocated() const noexcept { return m_allocated.size(); }

 private:
  std::vector<std::unique_ptr<std::uint8_t[]>> m_allocated;
  std::vector<std::uint8_t*> m_free;
  std::size_t m_inUse = 0;
};

}  // namespace timerwheel::rudp::detail
