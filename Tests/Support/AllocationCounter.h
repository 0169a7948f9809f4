// Counts the heap allocations a piece of code makes, for the tests that check that steady-state
// operations allocate nothing, and the bytes a component holds (HeapAccount). The replaced global
// operator new and delete live in AllocationCounter.cpp: linking that file into a test executable
// replaces the global allocation functions there.
#pragma once

#include <cstddef>
#include <cstdint>

namespace timerwheel::test {

// Counts allocations made by the current thread between construction and destruction (other
// threads' allocations are not counted). Not nestable.
class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  std::size_t Count() const;
};

// Makes one allocation fail as if the heap were exhausted: the `n`th (counting from 1) that the
// current thread makes while this lives and it is active (operator new throws std::bad_alloc, the
// nothrow forms return nullptr). Later ones succeed. For tests of what code leaves behind when an
// allocation fails part way. Not nestable.
class FailNthAllocation {
 public:
  explicit FailNthAllocation(std::size_t n);
  ~FailNthAllocation();
  FailNthAllocation(const FailNthAllocation&) = delete;
  FailNthAllocation& operator=(const FailNthAllocation&) = delete;

  // Only allocations made while active count (active from construction).
  void SetActive(bool active) noexcept;
  bool Failed() const noexcept;  // the `n`th came, and failed
};

// The bytes (as requested from operator new) and blocks that allocations charged to this account
// still hold: an allocation is charged to the account whose Charge scope is active on the
// allocating thread, and uncharged when it is freed, by whichever thread frees it, while the
// account exists. So a test can ask what one component of a process holds, e.g. one simulated
// host among several (MemoryPerConnectionTests). At most kMaxAccounts exist at once.
class HeapAccount {
 public:
  static constexpr std::size_t kMaxAccounts = 4;

  HeapAccount();
  ~HeapAccount();
  HeapAccount(const HeapAccount&) = delete;
  HeapAccount& operator=(const HeapAccount&) = delete;

  std::int64_t Bytes() const;
  std::int64_t Blocks() const;

  // While one lives, the current thread's allocations are charged to `account` (nullptr: to
  // none); the previous charge is restored when it ends. Nestable.
  class Charge {
   public:
    explicit Charge(HeapAccount* account) noexcept;
    ~Charge();
    Charge(const Charge&) = delete;
    Charge& operator=(const Charge&) = delete;

   private:
    std::uint32_t m_previous;
  };

 private:
  std::uint32_t m_index;  // 1..kMaxAccounts
};

}  // namespace timerwheel::test
