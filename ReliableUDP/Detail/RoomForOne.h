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

// As MakeRoomForOne, grown as push_back grows a vector (to twice its capacity, from one): for the
// vectors most owners hold one element in or none (a connection's queues of operations: 100,000
// idle connections, each with a receive pending), where the head room of 16 would cost 16 each.
template <class Vector>
void MakeRoomForOneTight(Vector& vector) {
  if (vector.capacity() == vector.size()) {
    vector.reserve((std::max)(std::size_t{1}, 2 * vector.capacity()));
  }
}

}  // namespace timerwheel::rudp::detail
