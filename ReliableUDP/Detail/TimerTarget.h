// Which connection, and which of its timers, a timer expiry is for: packed into the timer's user
// data, so that one ITimer (the endpoint) serves every connection's timers.
#pragma once

#include <cstdint>

#include "ReliableUDP/Statistics.h"
#include "TimerQueue/TimerTypes.h"

namespace timerwheel::rudp::detail {

// A connection's place in its endpoint's table. The generation tells it from the earlier
// connections that had the same slot: an expiry armed for one of those is ignored.
struct ConnectionSlot {
  std::uint32_t index = 0;
  std::uint32_t generation = 0;
};

struct TimerTarget {
  ConnectionSlot connection;
  TimerKind kind = TimerKind::LossDetection;
};

// The layout: generation (32 bits) | slot index (29 bits) | timer kind (3 bits).
inline constexpr unsigned kTimerKindBits = 3;
inline constexpr std::uint64_t kMaxConnectionSlots = std::uint64_t{1} << (32 - kTimerKindBits);
static_assert(kTimerKindCount <= (1u << kTimerKindBits), "every timer kind fits in its bits");
static_assert(sizeof(UserData) >= 8, "timer user data carries slot, generation and kind");

constexpr UserData PackTimerTarget(const TimerTarget& target) noexcept {
  return static_cast<UserData>((std::uint64_t{target.connection.generation} << 32) |
                               (std::uint64_t{target.connection.index} << kTimerKindBits) |
                               static_cast<std::uint64_t>(target.kind));
}

constexpr TimerTarget UnpackTimerTarget(UserData userData) noexcept {
  const auto value = static_cast<std::uint64_t>(userData);
  TimerTarget target;
  target.kind = static_cast<TimerKind>(value & ((1u << kTimerKindBits) - 1));
  target.connection.index =
      static_cast<std::uint32_t>((value >> kTimerKindBits) & (kMaxConnectionSlots - 1));
  target.connection.generation = static_cast<std::uint32_t>(value >> 32);
  return target;
}

}  // namespace timerwheel::rudp::detail
