// Gives a vector's spare capacity back where a failure must not come out (a connection's end).
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <new>
#include <type_traits>
#include <vector>

namespace timerwheel::rudp::detail {

// shrink_to_fit is only a request, and where it is honoured it reallocates: MSVC's may throw
// std::bad_alloc. This rebuilds the vector in an allocation for max(size, `keep`) elements (room
// that code which must not fail later pushes into), or, if that allocation fails, leaves the
// vector as it was.
template <class T>
void ShrinkCapacity(std::vector<T>& vector, std::size_t keep = 0) noexcept {
  static_assert(std::is_nothrow_move_constructible_v<T>, "a move that throws would lose elements");
  const std::size_t capacity = (std::max)(vector.size(), keep);
  if (vector.capacity() <= capacity) return;
  std::vector<T> smaller;
  try {
    smaller.reserve(capacity);
  } catch (const std::bad_alloc&) {
    return;
  }
  smaller.insert(smaller.end(), std::make_move_iterator(vector.begin()),
                 std::make_move_iterator(vector.end()));
  vector.swap(smaller);
}

}  // namespace timerwheel::rudp::detail
