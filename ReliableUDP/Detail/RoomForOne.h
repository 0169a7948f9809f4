// Room for more elements first, so that the push_backs after it cannot fail.
#pragma once

#include <algorithm>
#include <cstddef>

namespace timerwheel::rudp::detail {

// For code that must not fail once it has changed something (a handler taken, a chunk acquired, a
// connection ended): it makes room, which may throw std::bad_alloc and changes nothing, and then
// pushes, which cannot throw. Capacity for `count` elements in all; the growth is geometric, as
// push_back's own, so that making room before every push costs amortised O(1).
template <class Vector>
void MakeRoomFor(Vector& vector, std::size_t count) {
  if (vector.capacity() < count) vector.reserve((std::max)(count, 2 * vector.capacity() + 16));
}

template <class Vector>
void MakeRoomForOne(Vector& vector) {
  MakeRoomFor(vector, vector.size() + 1);
}

}  // namespace timerwheel::rudp::detail
