// The replaced global operator new and delete that CountAllocations reads (AllocationCounter.h).
#include "Support/AllocationCounter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local bool t_counting = false;
thread_local std::size_t t_allocations = 0;
}  // namespace

namespace timerwheel::test {

CountAllocations::CountAllocations() {
  t_allocations = 0;
  t_counting = true;
}

CountAllocations::~CountAllocations() { t_counting = false; }

std::size_t CountAllocations::Count() const { return t_allocations; }

}  // namespace timerwheel::test

// GCC cannot see that these replace the global pair, and warns that free() is given a pointer
// from operator new.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// The whole non-aligned family is replaced, so every new is paired with a matching delete.
namespace {
void* Allocate(std::size_t size) noexcept {
  if (t_counting) ++t_allocations;
  return std::malloc(size ? size : 1);
}
void* AllocateOrThrow(std::size_t size) {
  if (void* p = Allocate(size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t size) { return AllocateOrThrow(size); }
void* operator new[](std::size_t size) { return AllocateOrThrow(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return Allocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return Allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
