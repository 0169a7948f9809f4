// VectorQueue: first in, first out, and a queue that never empties stays small.
#include <catch2/catch.hpp>
#include <cstddef>
#include <memory>

#include "ReliableUDP/Detail/VectorQueue.h"
#include "Support/AllocationCounter.h"

using timerwheel::rudp::detail::VectorQueue;

TEST_CASE("VectorQueue pops in push order across its compactions") {
  VectorQueue<std::unique_ptr<int>> queue;
  int next = 0;
  int expected = 0;
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 3; ++i) queue.Push(std::make_unique<int>(next++));
    for (int i = 0; i < 2; ++i) {
      REQUIRE(*queue.Front() == expected++);
      queue.Pop();
    }
  }
  CHECK(queue.Size() == 1000);
  int count = 0;
  for (const auto& item : queue) CHECK(*item == expected + count++);
  while (!queue.Empty()) {
    REQUIRE(*queue.Front() == expected++);
    queue.Pop();
  }
  CHECK(expected == next);
}

// An application that keeps two receives (or sends) outstanding and posts the next as each
// completes: before, the vector grew by one item per operation until the queue emptied (151 MB
// for a million 144-byte operations), allocating at every doubling.
TEST_CASE("a VectorQueue that never empties allocates nothing once warm") {
  VectorQueue<std::unique_ptr<int>> queue;
  queue.Push(nullptr);
  queue.Push(nullptr);
  for (int i = 0; i < 1000; ++i) {  // warm: the vector reaches its steady size
    queue.Pop();
    queue.Push(nullptr);
  }
  timerwheel::test::CountAllocations allocations;
  for (int i = 0; i < 100'000; ++i) {
    queue.Pop();
    queue.Push(nullptr);
  }
  CHECK(allocations.Count() == 0);
  CHECK(queue.Size() == 2);
}

// The stream buffers' use: chunks by position from the front, grown with nulls where nothing
// arrived yet, several freed at once.
TEST_CASE("VectorQueue by position: GrowTo adds empty items and Pop(count) drops the front") {
  VectorQueue<int*> chunks;
  int values[40] = {};
  chunks.GrowTo(40);
  REQUIRE(chunks.Size() == 40);
  for (std::size_t i = 0; i < 40; ++i) {
    CHECK(chunks[i] == nullptr);
    chunks[i] = &values[i];
  }
  chunks.GrowTo(10);  // never shrinks
  CHECK(chunks.Size() == 40);
  chunks.Pop(25);  // compacts: 25 popped of 40
  REQUIRE(chunks.Size() == 15);
  for (std::size_t i = 0; i < 15; ++i) CHECK(chunks[i] == &values[25 + i]);
  chunks.GrowTo(20);
  CHECK(chunks[14] == &values[39]);
  CHECK(chunks[19] == nullptr);
  chunks.Pop(20);
  CHECK(chunks.Empty());
}
