// The input format of TimerQueueFuzzer, shared with the seed generator (MakeSeedCorpus).
//
// An input is a sequence of operations, each an opcode byte (taken modulo kTimerOpCount)
// followed by its arguments, read with FuzzInput (bytes past the end read as 0). The same bytes
// drive each implementation (heap, 15 ms wheel, 1 ms wheel) in lockstep with its own reference
// model; each consumes the input on its own, because callbacks read bytes too and the
// implementations fire at different times.
//
//   timer    one byte: index into the live timers (creating one if there is none)
//   timeout  one selector byte (% 8), then: 0: 0; 1: < 5 granularities (1 byte); 2: the maximum;
//            3: <= 5000 (2 bytes); 4: <= 100000 (4 bytes); 5: the maximum minus < 100 (1 byte);
//            6: anything up to the maximum (4 bytes); 7: a multiple of the granularity (1 byte)
//   budget   one byte: 0 is unlimited, else 1 + byte % 6
//
// A callback reads one byte: 1..29 (mod 100) run one mutating operation from inside the
// callback (its opcode and arguments follow), 30 and 31 throw, anything else does nothing.
#pragma once

#include <cstdint>

namespace timerwheel::fuzz {

enum class TimerOp : std::uint8_t {
  Create,                    // -
  Destroy,                   // timer
  Set,                       // timer, timeout, SetIf (byte & 1: NotSet)
  Update,                    // timer, timeout, UpdateIf (byte % 4)
  Cancel,                    // timer
  OneShot,                   // timeout
  IsSet,                     // timer
  BadHandle,                 // which (byte: 0 or no stale handle: null, else a stale one), call
                             // (byte % 5: Set, Cancel, Destroy, Update, TimerIsSet)
  OverMaximum,               // timer, call (byte % 3: Set, Update, OneShot), excess (U32)
  NextTimeout,               // -: GetNextTimeout and GetNextExpiry against the model
  AdvanceSmall,              // 1 byte: 0 .. 3 granularities
  AdvanceToNextAndDispatch,  // -: to the next expiry, then Dispatch
  Dispatch,                  // repeatedly: budget, mutate-between (byte % 3 == 0: an op
                             // follows), stop-early (byte % 5 == 0)
  LongGap,                   // 1 byte selects: % 10 == 0: up to 50 days (8 bytes), else up to
                             // 3 x the maximum timeout (8 bytes)
  CheckInvariants,           // -
};
inline constexpr std::uint8_t kTimerOpCount = 15;

}  // namespace timerwheel::fuzz
