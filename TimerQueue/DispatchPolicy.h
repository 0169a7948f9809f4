// How a driver runs timer callbacks relative to its lock.
#pragma once

namespace timerwheel {

enum class DispatchPolicy {
  // Begin / Handle / End: callbacks run without the driver's lock, so other threads can set and
  // cancel timers (including the ones firing) while callbacks run. The default.
  WithoutLock,
  // The whole dispatch (Begin, the callbacks, End) under the lock: simpler to reason about, but
  // every other thread's set or cancel waits for the whole batch of callbacks.
  WithLockHeld,
};

}  // namespace timerwheel
