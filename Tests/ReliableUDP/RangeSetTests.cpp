// RangeSet: merging, splitting, lookups, and a randomized comparison against std::set.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "ReliableUDP/Detail/RangeSet.h"

using timerwheel::rudp::detail::RangeSet;

namespace {

using Pairs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

Pairs RangesOf(const RangeSet& set) {
  Pairs result;
  for (std::size_t i = 0; i < set.RangeCount(); ++i) result.emplace_back(set[i].begin, set[i].end);
  return result;
}

}  // namespace

TEST_CASE("RangeSet merges adjacent and overlapping ranges", "[rudp][buffers]") {
  RangeSet set;
  CHECK(set.Empty());
  CHECK(set.Insert(10, 20) == 10);
  CHECK(set.Insert(30, 40) == 10);
  CHECK(RangesOf(set) == Pairs{{10, 20}, {30, 40}});

  SECTION("adjacent on the right") {
    CHECK(set.Insert(20, 25) == 5);
    CHECK(RangesOf(set) == Pairs{{10, 25}, {30, 40}});
  }
  SECTION("adjacent at the back") {
    CHECK(set.Insert(40, 45) == 5);
    CHECK(RangesOf(set) == Pairs{{10, 20}, {30, 45}});
  }
  SECTION("adjacent on the left") {
    CHECK(set.Insert(5, 10) == 5);
    CHECK(RangesOf(set) == Pairs{{5, 20}, {30, 40}});
  }
  SECTION("filling a gap exactly joins both neighbours") {
    CHECK(set.Insert(20, 30) == 10);
    CHECK(RangesOf(set) == Pairs{{10, 40}});
  }
  SECTION("overlapping one range") {
    CHECK(set.Insert(15, 25) == 5);
    CHECK(RangesOf(set) == Pairs{{10, 25}, {30, 40}});
  }
  SECTION("a duplicate adds nothing") {
    CHECK(set.Insert(12, 18) == 0);
    CHECK(set.Insert(10, 20) == 0);
    CHECK(RangesOf(set) == Pairs{{10, 20}, {30, 40}});
  }
  SECTION("bridging several ranges") {
    CHECK(set.Insert(50, 60) == 10);
    CHECK(set.Insert(70, 80) == 10);
    CHECK(set.Insert(15, 75) == 30);  // the gaps 20-30, 40-50 and 60-70 only
    CHECK(RangesOf(set) == Pairs{{10, 80}});
  }
  SECTION("covering everything") {
    CHECK(set.Insert(0, 100) == 80);
    CHECK(RangesOf(set) == Pairs{{0, 100}});
  }
  SECTION("a new range in the middle and at the front") {
    CHECK(set.Insert(22, 28) == 6);
    CHECK(set.Insert(0, 5) == 5);
    CHECK(RangesOf(set) == Pairs{{0, 5}, {10, 20}, {22, 28}, {30, 40}});
  }
}

TEST_CASE("RangeSet Erase splits and trims ranges", "[rudp][buffers]") {
  RangeSet set;
  set.Insert(10, 20);
  set.Insert(30, 40);
  set.Insert(50, 60);

  SECTION("strictly inside one range splits it") {
    set.Erase(13, 17);
    CHECK(RangesOf(set) == Pairs{{10, 13}, {17, 20}, {30, 40}, {50, 60}});
  }
  SECTION("an edge of a range trims it") {
    set.Erase(10, 12);
    set.Erase(38, 45);
    CHECK(RangesOf(set) == Pairs{{12, 20}, {30, 38}, {50, 60}});
  }
  SECTION("across several ranges") {
    set.Erase(15, 55);
    CHECK(RangesOf(set) == Pairs{{10, 15}, {55, 60}});
  }
  SECTION("whole ranges exactly") {
    set.Erase(30, 40);
    CHECK(RangesOf(set) == Pairs{{10, 20}, {50, 60}});
    set.Erase(0, 100);
    CHECK(set.Empty());
  }
  SECTION("in a gap changes nothing") {
    set.Erase(20, 30);
    set.Erase(61, 70);
    CHECK(RangesOf(set) == Pairs{{10, 20}, {30, 40}, {50, 60}});
  }
}

TEST_CASE("RangeSet EraseBelow drops a prefix", "[rudp][buffers]") {
  RangeSet set;
  set.Insert(10, 20);
  set.Insert(30, 40);
  set.EraseBelow(10);
  CHECK(RangesOf(set) == Pairs{{10, 20}, {30, 40}});
  set.EraseBelow(15);
  CHECK(RangesOf(set) == Pairs{{15, 20}, {30, 40}});
  set.EraseBelow(30);
  CHECK(RangesOf(set) == Pairs{{30, 40}});
  set.EraseBelow(40);
  CHECK(set.Empty());
  set.EraseBelow(0);
  CHECK(set.Empty());
}

TEST_CASE("RangeSet Contains and ContainsAll at the edges", "[rudp][buffers]") {
  RangeSet set;
  CHECK_FALSE(set.Contains(0));
  CHECK_FALSE(set.ContainsAll(0, 1));
  set.Insert(10, 20);
  set.Insert(30, 40);
  CHECK_FALSE(set.Contains(9));
  CHECK(set.Contains(10));
  CHECK(set.Contains(19));
  CHECK_FALSE(set.Contains(20));
  CHECK_FALSE(set.Contains(29));
  CHECK(set.Contains(30));
  CHECK(set.Contains(39));
  CHECK_FALSE(set.Contains(40));
  CHECK(set.ContainsAll(10, 20));
  CHECK(set.ContainsAll(12, 13));
  CHECK_FALSE(set.ContainsAll(9, 20));
  CHECK_FALSE(set.ContainsAll(10, 21));
  CHECK_FALSE(set.ContainsAll(15, 35));
  CHECK(set.ContainsAll(39, 40));
  CHECK(set.Front().begin == 10);
  CHECK(set.Back().end == 40);
  set.PopFront();
  CHECK(RangesOf(set) == Pairs{{30, 40}});
  set.Clear();
  CHECK(set.Empty());
  set.ShrinkToFit();
  CHECK(set.Empty());
  set.Insert(0, 1);
  CHECK(set.Contains(0));
}

TEST_CASE("RangeSet matches std::set over random operations", "[rudp][buffers]") {
  // A few dozen long ranges; or hundreds of short ones, so that the room the front leaves is
  // reclaimed and reused many times.
  const auto [kUniverse, kMaxLength] = GENERATE(std::pair<std::uint64_t, std::uint64_t>{2000, 40},
                                                std::pair<std::uint64_t, std::uint64_t>{4000, 2});
  CAPTURE(kUniverse, kMaxLength);
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<std::uint64_t> value(0, kUniverse - 1);
  std::uniform_int_distribution<std::uint64_t> length(1, kMaxLength);
  std::uniform_int_distribution<int> operation(0, 99);
  RangeSet set;
  std::set<std::uint64_t> model;

  for (int step = 0; step < 100000; ++step) {
    const std::uint64_t begin = value(rng);
    const std::uint64_t end = begin + length(rng);
    const int op = operation(rng);
    if (op < 50) {
      std::uint64_t added = 0;
      for (std::uint64_t v = begin; v < end; ++v) added += model.insert(v).second ? 1 : 0;
      REQUIRE(set.Insert(begin, end) == added);
    } else if (op < 85) {
      model.erase(model.lower_bound(begin), model.lower_bound(end));
      set.Erase(begin, end);
    } else if (op < 87) {
      const std::uint64_t below = begin / 4;  // mostly small, so the set does not stay empty
      model.erase(model.begin(), model.lower_bound(below));
      set.EraseBelow(below);
    } else if (op < 90 && !set.Empty()) {
      const auto front = set.Front();
      model.erase(model.lower_bound(front.begin), model.lower_bound(front.end));
      set.PopFront();
    } else if (op < 91 && !set.Empty()) {
      const auto back = set.Back();
      model.erase(model.lower_bound(back.begin), model.lower_bound(back.end));
      set.PopBack();
    } else {
      bool all = true;
      for (std::uint64_t v = begin; v < end; ++v) all = all && model.count(v) != 0;
      REQUIRE(set.ContainsAll(begin, end) == all);
      REQUIRE(set.Contains(begin) == (model.count(begin) != 0));
    }

    // Invariants after every step: sorted, non-empty, disjoint and non-adjacent, as many values as
    // the model; now and then, exactly the model's values.
    std::size_t count = 0;
    bool wellFormed = true;
    for (std::size_t i = 0; i < set.RangeCount(); ++i) {
      wellFormed = wellFormed && set[i].begin < set[i].end;
      if (i > 0) wellFormed = wellFormed && set[i - 1].end < set[i].begin;
      count += set[i].end - set[i].begin;
    }
    REQUIRE(wellFormed);
    REQUIRE(count == model.size());
    if (step % 97 == 0 || step > 99900) {
      std::uint64_t mismatches = 0;  // one REQUIRE per sweep keeps the test fast
      for (std::uint64_t v = 0; v < kUniverse + 40; ++v) {
        if (set.Contains(v) != (model.count(v) != 0)) ++mismatches;
      }
      REQUIRE(mismatches == 0);
    }
  }
}
