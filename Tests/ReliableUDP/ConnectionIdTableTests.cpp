// ConnectionIdTable: lookups, erases that shift a run back, growth and shrinking, and a randomized
// comparison against std::unordered_map.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "ReliableUDP/Detail/ConnectionIdTable.h"

using timerwheel::rudp::detail::ConnectionIdTable;

TEST_CASE("ConnectionIdTable finds what was inserted and nothing else", "[rudp][endpoint]") {
  ConnectionIdTable table;
  CHECK(table.Find(7) == ConnectionIdTable::kNotFound);
  CHECK(table.Find(0) == ConnectionIdTable::kNotFound);
  table.Insert(7, 70);
  table.Insert(0xFFFFFFFFFFFFFFFFull, 1);
  CHECK(table.Find(7) == 70);
  CHECK(table.Find(0xFFFFFFFFFFFFFFFFull) == 1);
  CHECK(table.Find(8) == ConnectionIdTable::kNotFound);
  CHECK(table.Find(0) == ConnectionIdTable::kNotFound);  // 0 marks an empty entry, never found
  CHECK(table.Size() == 2);
  table.Erase(7);
  table.Erase(9);  // absent: nothing changes
  CHECK(table.Find(7) == ConnectionIdTable::kNotFound);
  CHECK(table.Find(0xFFFFFFFFFFFFFFFFull) == 1);
  CHECK(table.Size() == 1);
}

TEST_CASE("ConnectionIdTable stays at most half full and shrinks after churn", "[rudp][endpoint]") {
  ConnectionIdTable table;
  for (std::uint64_t id = 1; id <= 10'000; ++id) {
    table.Insert(id, static_cast<std::uint32_t>(id));
    REQUIRE(2 * table.Size() <= table.Capacity());
  }
  CHECK(table.Capacity() == 32'768);
  for (std::uint64_t id = 1; id <= 9'900; ++id) table.Erase(id);
  table.ShrinkIfSparse();
  CHECK(table.Size() == 100);
  CHECK(table.Capacity() == 512);  // a quarter full at most, and never below 16
  for (std::uint64_t id = 9'901; id <= 10'000; ++id) CHECK(table.Find(id) == id);
  for (std::uint64_t id = 9'901; id <= 10'000; ++id) table.Erase(id);
  table.ShrinkIfSparse();
  CHECK(table.Capacity() == 16);
  CHECK(table.Size() == 0);
}

TEST_CASE("ConnectionIdTable agrees with std::unordered_map under random churn",
          "[rudp][endpoint]") {
  // A small pool of IDs into a small table: runs are long and wrap around the array's end, so
  // the erase's backward shift is exercised in every arrangement.
  std::mt19937_64 random(GENERATE(1u, 2u, 3u));
  std::vector<std::uint64_t> pool(48);
  for (auto& id : pool) id = random() | 1;  // never 0
  ConnectionIdTable table;
  std::unordered_map<std::uint64_t, std::uint32_t> expected;
  for (std::uint32_t step = 0; step < 20'000; ++step) {
    const std::uint64_t id = pool[random() % pool.size()];
    if (expected.count(id) != 0) {
      table.Erase(id);
      expected.erase(id);
    } else if (random() % 4 != 0) {
      table.Insert(id, step);
      expected.emplace(id, step);
    }
    if (step % 97 == 0) table.ShrinkIfSparse();
    REQUIRE(table.Size() == expected.size());
    for (const std::uint64_t each : pool) {
      const auto found = expected.find(each);
      REQUIRE(table.Find(each) ==
              (found == expected.end() ? ConnectionIdTable::kNotFound : found->second));
    }
  }
}
