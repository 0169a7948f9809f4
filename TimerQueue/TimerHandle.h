// A small value type naming one timer inside one queue.
#pragma once

#include <cstdint>

namespace timerwheel {

namespace detail {
class TimerHandleAccess;
}

// What CreateTimer returns. A default-constructed handle is null, and every queue rejects it with
// InvalidTimerHandle. A handle is an index into the queue's record pool plus the generation of the
// record when it was created: destroying a timer bumps the generation, so a stale copy of the
// handle can never reach a newer timer that reuses the slot (validation is one compare).
// Handles are only meaningful to the queue that created them: every queue numbers its records
// and generations the same way, so one passed to another queue is refused only when it names no
// live timer there; otherwise it acts on that queue's timer, as a pointer into the wrong
// container would (checking it would cost a queue tag in every handle and a compare more in every
// call).
// Aligned like a 64-bit integer so that std::atomic<TimerHandle> is lock-free with every compiler
// (with 4-byte alignment Clang calls libatomic for it).
class alignas(8) TimerHandle {
 public:
  constexpr TimerHandle() noexcept = default;

  constexpr bool IsNull() const noexcept { return m_generation == 0; }

  friend constexpr bool operator==(TimerHandle a, TimerHandle b) noexcept {
    return a.m_index == b.m_index && a.m_generation == b.m_generation;
  }
  friend constexpr bool operator!=(TimerHandle a, TimerHandle b) noexcept { return !(a == b); }

  // For diagnostics only.
  constexpr std::uint32_t Index() const noexcept { return m_index; }
  constexpr std::uint32_t Generation() const noexcept { return m_generation; }

 private:
  friend class detail::TimerHandleAccess;
  constexpr TimerHandle(std::uint32_t index, std::uint32_t generation) noexcept
      : m_index(index), m_generation(generation) {}

  std::uint32_t m_index = 0;
  std::uint32_t m_generation = 0;  // 0 = null; live records start at 1
};

namespace detail {
// The only way to mint a non-null handle: used by the record pool.
class TimerHandleAccess {
 public:
  static constexpr TimerHandle Make(std::uint32_t index, std::uint32_t generation) noexcept {
    return TimerHandle(index, generation);
  }
};
}  // namespace detail

}  // namespace timerwheel
