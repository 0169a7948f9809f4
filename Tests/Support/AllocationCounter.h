// Counts the heap allocations a piece of code makes, for the tests that check that steady-state
// operations allocate nothing. The counting global operator new lives in AllocationCounter.cpp:
// linking that file into a test executable replaces the global allocation functions there.
#pragma once

#include <cstddef>

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

}  // namespace timerwheel::test
