// Room for one more element first, so that the push_back after it cannot fail.
#pragma once

namespace timerwheel::rudp::detail {

// For code that must not fail once it has changed something (a handler taken, a chunk acquired):
// it makes room, which may throw std::bad_alloc and changes nothing, and then pushes, which cannot
// throw. The growth is geometric, as push_back's own, so that making room before every push costs
// amortised O(1).
template <class Vector>
void MakeRoomForOne(Vector& vector) {
  if (vector.size() == vector.capacity()) vector.reserve(2 * vector.size() + 16);
}

}  // namespace timerwheel::rudp::detail
