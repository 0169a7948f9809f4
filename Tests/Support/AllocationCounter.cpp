// The replaced global operator new and delete that CountAllocations and HeapAccount read
// (AllocationCounter.h).
#include "Support/AllocationCounter.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace {
thread_local bool t_counting = false;
thread_local std::size_t t_allocations = 0;
thread_local std::size_t t_failCountdown = 0;  // 0: no failure armed
thread_local bool t_failActive = false;
thread_local bool t_failed = false;

// Accounts by index (0: none). Each has a generation, bumped when an account takes or leaves the
// index, so that a block charged to an account that no longer exists uncharges nothing.
struct AccountState {
  std::atomic<std::uint32_t> generation{1};
  std::atomic<bool> inUse{false};
  std::atomic<std::int64_t> bytes{0};
  std::atomic<std::int64_t> blocks{0};
};
AccountState g_accounts[timerwheel::test::HeapAccount::kMaxAccounts + 1];
thread_local std::uint32_t t_charged = 0;  // the account index the thread's allocations go to

// Every block starts with this header (the size of max_align_t's alignment, so the caller's
// pointer keeps malloc's alignment): which account it was charged to, and its size.
struct alignas(alignof(std::max_align_t)) BlockHeader {
  std::size_t size;
  std::uint32_t account;
  std::uint32_t generation;
};
constexpr std::size_t kHeaderSize = sizeof(BlockHeader);
}  // namespace

namespace timerwheel::test {

CountAllocations::CountAllocations() {
  t_allocations = 0;
  t_counting = true;
}

CountAllocations::~CountAllocations() { t_counting = false; }

std::size_t CountAllocations::Count() const { return t_allocations; }

FailNthAllocation::FailNthAllocation(std::size_t n) {
  if (n == 0) throw std::invalid_argument("FailNthAllocation: n counts from 1");
  t_failCountdown = n;
  t_failActive = true;
  t_failed = false;
}

FailNthAllocation::~FailNthAllocation() {
  t_failCountdown = 0;
  t_failActive = false;
}

void FailNthAllocation::SetActive(bool active) noexcept { t_failActive = active; }

bool FailNthAllocation::Failed() const noexcept { return t_failed; }

HeapAccount::HeapAccount() : m_index(0) {
  for (std::uint32_t i = 1; i <= kMaxAccounts; ++i) {
    bool expected = false;
    if (g_accounts[i].inUse.compare_exchange_strong(expected, true)) {
      g_accounts[i].generation.fetch_add(1);
      g_accounts[i].bytes.store(0);
      g_accounts[i].blocks.store(0);
      m_index = i;
      return;
    }
  }
  throw std::logic_error("HeapAccount: more than kMaxAccounts at once");
}

HeapAccount::~HeapAccount() {
  g_accounts[m_index].generation.fetch_add(1);
  g_accounts[m_index].inUse.store(false);
}

std::int64_t HeapAccount::Bytes() const { return g_accounts[m_index].bytes.load(); }
std::int64_t HeapAccount::Blocks() const { return g_accounts[m_index].blocks.load(); }

HeapAccount::Charge::Charge(HeapAccount* account) noexcept : m_previous(t_charged) {
  t_charged = account != nullptr ? account->m_index : 0;
}

HeapAccount::Charge::~Charge() { t_charged = m_previous; }

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
  if (t_failActive && t_failCountdown != 0 && --t_failCountdown == 0) {
    t_failed = true;
    return nullptr;
  }
  if (size > ~std::size_t{0} - kHeaderSize) return nullptr;
  void* const block = std::malloc(kHeaderSize + size);
  if (block == nullptr) return nullptr;
  BlockHeader header{size, t_charged, 0};
  if (t_charged != 0) {
    AccountState& account = g_accounts[t_charged];
    header.generation = account.generation.load(std::memory_order_relaxed);
    account.bytes.fetch_add(static_cast<std::int64_t>(size), std::memory_order_relaxed);
    account.blocks.fetch_add(1, std::memory_order_relaxed);
  }
  std::memcpy(block, &header, sizeof header);
  return static_cast<unsigned char*>(block) + kHeaderSize;
}
void* AllocateOrThrow(std::size_t size) {
  if (void* p = Allocate(size)) return p;
  throw std::bad_alloc();
}
void Free(void* p) noexcept {
  if (p == nullptr) return;
  void* const block = static_cast<unsigned char*>(p) - kHeaderSize;
  BlockHeader header;
  std::memcpy(&header, block, sizeof header);
  if (header.account != 0) {
    AccountState& account = g_accounts[header.account];
    if (account.generation.load(std::memory_order_relaxed) == header.generation) {
      account.bytes.fetch_sub(static_cast<std::int64_t>(header.size), std::memory_order_relaxed);
      account.blocks.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  std::free(block);
}
}  // namespace

void* operator new(std::size_t size) { return AllocateOrThrow(size); }
void* operator new[](std::size_t size) { return AllocateOrThrow(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return Allocate(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return Allocate(size); }
void operator delete(void* p) noexcept { Free(p); }
void operator delete[](void* p) noexcept { Free(p); }
void operator delete(void* p, std::size_t) noexcept { Free(p); }
void operator delete[](void* p, std::size_t) noexcept { Free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { Free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { Free(p); }
