// HandlerMemory: recycled memory for the Asio operations one object starts over and over (a timer's
// wait, a socket's wait, a post), so that a warm driver or endpoint allocates nothing per
// operation.
#pragma once

#include <cstddef>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>

namespace timerwheel::detail {

// A free list of fixed-size blocks, grown on demand and kept until destruction: its size is the
// most operations of the owner that were ever outstanding at once (a few for a timer or a socket
// wait; for posted completions, the largest batch). Larger requests go to the global heap.
//
// Asio allocates an operation when it is started (often under the owner's own lock) and frees it
// just before its handler runs, on whichever thread runs the io_context, so a small mutex guards
// the list. The owner must outlive every operation that uses it: the handler (which Asio keeps
// alive until after the free) holds a shared_ptr to the owner, as the owners here do anyway.
//
// Like asio's example handler_allocator, with many blocks instead of one: Boost 1.74's own
// recycling keeps one block per thread, which the several operations of one wake-up overrun.
class HandlerMemory {
 public:
  // Room for any operation these owners start: Asio's operation header, the executor, and a
  // handler of a shared_ptr plus one engine Completion (about 110 bytes).
  static constexpr std::size_t kBlockSize = 256;

  HandlerMemory() = default;
  HandlerMemory(const HandlerMemory&) = delete;
  HandlerMemory& operator=(const HandlerMemory&) = delete;
  ~HandlerMemory() { FreeChain(m_free); }

  // Adds `blocks` blocks to the free list at once, all or none (std::bad_alloc). An owner whose
  // operations must not fail for memory (those started from a destructor or a noexcept path)
  // reserves as many as it can ever have outstanding at once: since blocks are kept, no later
  // Allocate of a block-sized operation then reaches the heap.
  void Reserve(std::size_t blocks) {
    FreeBlock* chain = nullptr;
    FreeBlock* last = nullptr;  // the chain's end: its first block
    try {
      for (std::size_t i = 0; i < blocks; ++i) {
        chain = ::new (::operator new(kBlockSize)) FreeBlock{chain};
        if (last == nullptr) last = chain;
      }
    } catch (...) {
      FreeChain(chain);
      throw;
    }
    if (last == nullptr) return;
    std::lock_guard<std::mutex> lock(m_mutex);
    last->next = m_free;
    m_free = chain;
  }

  void* Allocate(std::size_t size) {
    if (size > kBlockSize) return ::operator new(size);
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      if (m_free != nullptr) {
        FreeBlock* block = m_free;
        m_free = block->next;
        return block;
      }
    }
    return ::operator new(kBlockSize);
  }

  void Deallocate(void* pointer, std::size_t size) noexcept {
    if (size > kBlockSize) {
      ::operator delete(pointer);
      return;
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    m_free = ::new (pointer) FreeBlock{m_free};
  }

 private:
  struct FreeBlock {
    FreeBlock* next;
  };

  static void FreeChain(FreeBlock* block) noexcept {
    while (block != nullptr) {
      FreeBlock* next = block->next;
      ::operator delete(block);
      block = next;
    }
  }

  std::mutex m_mutex;  // guards m_free
  FreeBlock* m_free = nullptr;
};

// A standard allocator over a HandlerMemory: what Asio uses for an operation when the handler
// names it (associated_allocator finds allocator_type and get_allocator()).
template <class T>
class HandlerAllocator {
 public:
  using value_type = T;

  explicit HandlerAllocator(HandlerMemory& memory) noexcept : m_memory(&memory) {}
  template <class U>
  HandlerAllocator(const HandlerAllocator<U>& other) noexcept  // NOLINT: rebinding is implicit
      : m_memory(other.Memory()) {}

  T* allocate(std::size_t n) { return static_cast<T*>(m_memory->Allocate(sizeof(T) * n)); }
  void deallocate(T* pointer, std::size_t n) noexcept {
    m_memory->Deallocate(pointer, sizeof(T) * n);
  }
  HandlerMemory* Memory() const noexcept { return m_memory; }

  template <class U>
  bool operator==(const HandlerAllocator<U>& other) const noexcept {
    return m_memory == other.Memory();
  }
  template <class U>
  bool operator!=(const HandlerAllocator<U>& other) const noexcept {
    return m_memory != other.Memory();
  }

 private:
  HandlerMemory* m_memory;
};

// A handler whose operation lives in `memory`: wrap the handler of each async_wait, post, ...
template <class Handler>
class HandlerWithMemory {
 public:
  using allocator_type = HandlerAllocator<Handler>;

  HandlerWithMemory(HandlerMemory& memory, Handler handler)
      : m_memory(&memory), m_handler(std::move(handler)) {}

  allocator_type get_allocator() const noexcept { return allocator_type(*m_memory); }

  template <class... Args>
  void operator()(Args&&... args) {
    m_handler(std::forward<Args>(args)...);
  }

 private:
  HandlerMemory* m_memory;
  Handler m_handler;
};

template <class Handler>
HandlerWithMemory<std::decay_t<Handler>> WithMemory(HandlerMemory& memory, Handler&& handler) {
  return HandlerWithMemory<std::decay_t<Handler>>(memory, std::forward<Handler>(handler));
}

}  // namespace timerwheel::detail
