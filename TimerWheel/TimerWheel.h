// TimerWheel: a fixed-granularity timer wheel. O(1) set and cancel, for timers that are almost
// always re-armed or cancelled before they fire.
#pragma once

#include <cstddef>

#include "TimerQueue/Core/BasicTimerQueue.h"
#include "TimerQueue/SystemTickProvider.h"
#include "TimerWheel/Detail/WheelScheduler.h"

namespace timerwheel {

struct TimerWheelOptions {
  Milliseconds maximumTimeout = 60'000;   // M: the largest timeout accepted
  Milliseconds granularity = 15;          // g: slot width (the Windows tick is 15.6 ms)
  ITimerQueueMonitor* monitor = nullptr;  // not owned; must outlive the wheel
  std::size_t initialCapacity = 0;        // timers to make room for up front
};

// A ring of ceil((M + L) / g) + 2 slots (rounded up to a power of two; L is the clock's
// ReadingLagBound), each an intrusive FIFO list of timers, with records pooled as in TimerQueue.
//
// Why: a reliable-UDP server keeps retransmit, delayed-ACK, keepalive and idle timers for every
// connection and re-arms them on almost every packet; here that costs a list unlink and link.
//
// Rounding: a timer set at t with timeout d fires at the first multiple of g at or after t + d + L
// (L the clock's ReadingLagBound: 0 for a manual clock): never early, at most g - 1 + L ms late.
// Timers in one slot fire in the order they were set.
// Maximum: any timeout <= M is accepted at any time, even if the wheel has not been dispatched
// for a long time (no lag); over M throws std::out_of_range and changes nothing.
// Long gaps: after any gap, the next dispatch fires everything due, in slot order; the catch-up
// costs O(timers due + one bitmap scan), never O(length of the gap).
//
// Thread safety: none; use it from one thread or through a driver. Dispatch follows
// IManageTimerQueue's Begin/Handle/End contract.
// Complexity: Create, Set, Update, Cancel, Destroy O(1); GetNextTimeout O(1) while the slot of
// a kept lower bound on the earliest occupied slot is occupied, otherwise a scan of one 64-bit
// word per 64 slots of level 1 of the occupancy bitmap and one level-0 word (two words for up to
// 4096 slots); nothing allocates in steady state.
// Memory: 8 bytes per slot plus 56 bytes per timer: a 16-byte hot record (handle key, links,
// slot) that set, cancel and validation touch, a 32-byte cold one (callback, user data, deadline,
// generation) written when a timer is armed, created or fired, and its 8-byte last dispatch-batch
// entry; and, from the first dispatch on, the batch's room, kept: 16 bytes an entry for as many
// as timers were set at the busiest dispatch so far, grown twofold (BeginTimeoutHandling
// reserves for every set timer before it detaches any, so that detaching cannot fail half-way).
class TimerWheel final : public detail::BasicTimerQueue<detail::WheelScheduler> {
 public:
  // Throws std::invalid_argument for g == 0, M == 0, M + L + 2g over 2^32 - 1, or more than 2^24
  // slots.
  explicit TimerWheel(TimerWheelOptions options = {},
                      const ITickProvider& ticks = SystemTickProvider::Instance());
  explicit TimerWheel(const ITickProvider& ticks);

  Milliseconds GetGranularity() const noexcept;
};

}  // namespace timerwheel
