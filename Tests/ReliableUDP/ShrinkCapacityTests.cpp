// ShrinkCapacity: spare capacity given back, room kept, and nothing changed when the memory for the
// smaller vector cannot be had.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ReliableUDP/Detail/ShrinkCapacity.h"
#include "Support/AllocationCounter.h"

using timerwheel::rudp::detail::ShrinkCapacity;

TEST_CASE("ShrinkCapacity gives spare capacity back and keeps the room asked for") {
  std::vector<std::uint32_t> values(1000);
  for (std::uint32_t i = 0; i < 1000; ++i) values[i] = i;
  values.resize(10);
  SECTION("to the size") {
    ShrinkCapacity(values);
    CHECK(values.capacity() == 10);
  }
  SECTION("to the room kept for later pushes, which then allocate nothing") {
    ShrinkCapacity(values, 40);
    CHECK(values.capacity() == 40);
    timerwheel::test::FailNthAllocation failure(1);
    for (std::uint32_t i = 10; i < 40; ++i) values.push_back(i);
    CHECK_FALSE(failure.Failed());
    values.resize(10);
  }
  REQUIRE(values.size() == 10);
  for (std::uint32_t i = 0; i < 10; ++i) CHECK(values[i] == i);
}

TEST_CASE("ShrinkCapacity leaves the vector as it was when its allocation fails") {
  std::vector<std::shared_ptr<int>> values;
  for (int i = 0; i < 100; ++i) values.push_back(std::make_shared<int>(i));
  values.resize(3);
  const std::size_t capacity = values.capacity();
  {
#if defined(_ITERATOR_DEBUG_LEVEL) && _ITERATOR_DEBUG_LEVEL != 0
    // MSVC's checked library allocates a proxy as the new vector is made (in a noexcept
    // constructor, so failing it would terminate): fail the allocation of its elements instead.
    timerwheel::test::FailNthAllocation failure(2);
#else
    timerwheel::test::FailNthAllocation failure(1);
#endif
    ShrinkCapacity(values);
    CHECK(failure.Failed());
  }
  CHECK(values.capacity() == capacity);
  REQUIRE(values.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(*values[static_cast<std::size_t>(i)] == i);
}
