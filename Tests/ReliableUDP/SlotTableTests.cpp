// SlotTable: EndpointCore's connection slots. Reuse, generations across a cut, and what ending
// many connections costs in any order.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "ReliableUDP/Detail/SlotTable.h"
#include "Support/AllocationCounter.h"

using timerwheel::rudp::detail::SlotTable;

namespace {

struct TestSlot {
  bool used = false;
  std::uint32_t generation = 0;
  bool InUse() const noexcept { return used; }
};

// Uses and releases slots as EndpointCore does (Retire: empty, move the generation on, release,
// shrink), checking the table after each cut.
class Owner {
 public:
  explicit Owner(std::size_t maximumSlots = 1u << 20) : table(maximumSlots) {}

  std::uint32_t Use() {
    const std::uint32_t slot = table.Allocate();
    REQUIRE(slot < table.Size());
    REQUIRE_FALSE(table[slot].used);
    table[slot].used = true;
    ++inUse;
    return slot;
  }

  void End(std::uint32_t slot) {
    REQUIRE(table[slot].used);
    table[slot].used = false;
    ++table[slot].generation;
    --inUse;
    table.Release(slot);
    const std::size_t size = table.Size();
    table.ShrinkIfSparse();
    if (table.Size() != size) {
      // A cut: the free list holds at most twice the free slots.
      CHECK(table.FreeListEntries() <= 2 * (table.Size() - inUse));
    }
  }

  SlotTable<TestSlot> table;
  std::size_t inUse = 0;
};

}  // namespace

TEST_CASE("SlotTable reuses the slot released last") {
  Owner owner;
  for (std::uint32_t i = 0; i < 10; ++i) REQUIRE(owner.Use() == i);
  owner.End(3);
  owner.End(7);
  CHECK(owner.Use() == 7);
  CHECK(owner.Use() == 3);
  CHECK(owner.Use() == 10);
  CHECK(owner.table.Size() == 11);
}

TEST_CASE("SlotTable cuts its free end once sparse and starts regrown slots past every cut one") {
  Owner owner;
  for (std::uint32_t i = 0; i < 100; ++i) owner.Use();
  for (std::uint32_t i = 10; i < 100; ++i) owner.End(i);  // 10 in use: above 4 x 10, cut to 10
  CHECK(owner.table.Size() == 10);
  // The slots cut had generation 1 (one occupant each): a new slot 10 starts there, so whatever
  // still names slot 10's old occupant (generation 0) does not match it.
  const std::uint32_t slot = owner.Use();
  CHECK(slot == 10);
  CHECK(owner.table[slot].generation == 1);
  CHECK(owner.Use() == 11);
}

TEST_CASE("SlotTable skips the free-list entries of cut slots") {
  Owner owner;
  for (std::uint32_t i = 0; i < 100; ++i) owner.Use();
  for (std::uint32_t i = 0; i < 80; ++i) owner.End(i);
  owner.End(99);  // 19 in use of 100: the free slot 99 is cut, its entry left in the list
  REQUIRE(owner.table.Size() == 99);
  CHECK(owner.table.FreeListEntries() == 81);  // one stale of 81: not yet filtered
  CHECK(owner.Use() == 79);                    // the entry of 99, on top, is skipped
}

TEST_CASE("SlotTable refuses a slot beyond its maximum and changes nothing") {
  Owner owner(4);
  for (std::uint32_t i = 0; i < 4; ++i) owner.Use();
  CHECK_THROWS_AS(owner.table.Allocate(), std::length_error);
  CHECK(owner.table.Size() == 4);
  owner.End(2);
  CHECK(owner.Use() == 2);
}

// Before SlotTable, every release past the sparse threshold filtered the whole free list, even
// when nothing was cut: with the table's last slot in use, ending a million connections in slot
// order kept the thread busy for tens of seconds.
TEST_CASE("ending connections costs the slot table linear work in any order") {
  constexpr std::uint32_t kSlots = 20'000;
  Owner owner;
  for (std::uint32_t i = 0; i < kSlots; ++i) REQUIRE(owner.Use() == i);
  SECTION("in slot order: the last slot ends last") {
    for (std::uint32_t slot = 0; slot < kSlots; ++slot) owner.End(slot);
    CHECK(owner.table.Size() == 0);
    CHECK(owner.table.FreeListEntries() == 0);
    CHECK(owner.table.FilteredEntries() <= 2 * kSlots);
  }
  SECTION("three quarters in slot order, then the rest from the end down") {
    for (std::uint32_t slot = 0; slot < kSlots * 3 / 4; ++slot) owner.End(slot);
    for (std::uint32_t slot = kSlots; slot-- > kSlots * 3 / 4;) owner.End(slot);
    CHECK(owner.table.Size() == 0);
    CHECK(owner.table.FilteredEntries() <= 2 * kSlots);
  }
  SECTION("ends and new connections interleaved: the table shrinks and grows again") {
    std::vector<std::uint32_t> live;
    for (std::uint32_t i = 0; i < kSlots; ++i) live.push_back(i);
    for (int round = 0; round < 4; ++round) {
      // All but every eighth end, from the end down; then half as many again connect.
      std::vector<std::uint32_t> kept;
      for (std::size_t i = live.size(); i-- > 0;) {
        if (i % 8 == 0) {
          kept.push_back(live[i]);
        } else {
          owner.End(live[i]);
        }
      }
      live = kept;
      for (std::uint32_t i = 0; i < kSlots / 2; ++i) live.push_back(owner.Use());
    }
    for (std::uint32_t slot : live) owner.End(slot);
    CHECK(owner.table.Size() == 0);
    CHECK(owner.table.FilteredEntries() <= 4 * kSlots);
  }
}

TEST_CASE("SlotTable takes back a slot its owner could not fill") {
  Owner owner;
  for (std::uint32_t i = 0; i < 4; ++i) REQUIRE(owner.Use() == i);
  SECTION("a slot the table grew for is cut again") {
    const std::uint32_t slot = owner.table.Allocate();
    REQUIRE(slot == 4);
    const std::uint32_t generation = ++owner.table[slot].generation;
    owner.table.Unallocate(slot);
    CHECK(owner.table.Size() == 4);
    CHECK(owner.table.FreeListEntries() == 0);
    // Grown again, it starts past the generation its abandoned occupant had.
    REQUIRE(owner.table.Allocate() == 4);
    CHECK(owner.table[4].generation >= generation);
  }
  SECTION("a slot from the free list goes back to it") {
    owner.End(1);
    owner.End(2);
    const std::uint32_t slot = owner.table.Allocate();
    REQUIRE(slot == 2);
    ++owner.table[slot].generation;
    owner.table.Unallocate(slot);
    CHECK(owner.table.Size() == 4);
    CHECK(owner.table.FreeListEntries() == 2);
    CHECK(owner.Use() == 2);
    CHECK(owner.Use() == 1);
    CHECK(owner.Use() == 4);
  }
}

// A slot is released as its connection ends, which must not fail: the free list keeps room for
// every slot in use, through growth, reuse and cuts.
TEST_CASE("SlotTable releases without allocating") {
  Owner owner;
  std::vector<std::uint32_t> live;
  SECTION("slots never released before") {
    for (int i = 0; i < 1000; ++i) live.push_back(owner.Use());
  }
  SECTION("after growth, reuse and cuts") {
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 300; ++i) live.push_back(owner.Use());
      // End every other one, then the newest: cuts, stale entries, reuse.
      std::vector<std::uint32_t> kept;
      for (std::size_t i = 0; i < live.size(); ++i) {
        if (i % 2 == 0) {
          owner.End(live[i]);
        } else {
          kept.push_back(live[i]);
        }
      }
      live = kept;
      for (int i = 0; i < 50; ++i) {
        owner.End(live.back());
        live.pop_back();
      }
    }
  }
  REQUIRE(!live.empty());
  timerwheel::test::FailNthAllocation failure(1);
  for (const std::uint32_t slot : live) {
    REQUIRE(owner.table[slot].used);
    owner.table[slot].used = false;
    ++owner.table[slot].generation;
    owner.table.Release(slot);
  }
  CHECK_FALSE(failure.Failed());
}
