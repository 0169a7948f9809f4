// Extends a wrapping 32-bit millisecond counter (GetTickCount-style) to a 64-bit ITickProvider.
#pragma once

#include <atomic>
#include <cstdint>

#include "TimerQueue/ITickProvider.h"

namespace timerwheel {

// A millisecond counter that wraps to 0 every 2^32 ms (49.7 days), like Windows' GetTickCount().
class IWrappingTickSource {
 public:
  virtual std::uint32_t GetTickCount32() const = 0;
  // How far a reading may be behind the true instant, as ITickProvider::ReadingLagBound (which
  // the adapter reports for it): 0 for a counter that is the instant itself (a test's), 1 for a
  // clock floored to whole ms, more for one that advances in steps (GetTickCount).
  virtual Ticks ReadingLagBound() const noexcept { return 0; }
  virtual ~IWrappingTickSource() = default;
};

// The OS's 32-bit counter: ::GetTickCount() on Windows, which advances once per clock interrupt
// (its lag bound is CoarseTickProvider's there, 18 ms), the low 32 bits of the steady clock
// floored to ms elsewhere (lag bound 1).
class SystemWrappingTickSource final : public IWrappingTickSource {
 public:
  std::uint32_t GetTickCount32() const override;
  Ticks ReadingLagBound() const noexcept override;
};

// Adapts an IWrappingTickSource to ITickProvider by counting the wraps. The 64-bit result starts
// at the source's value at construction and advances by the (modulo 2^32) difference between
// successive reads, so it stays correct as long as it is read at least once every 49.7 days: every
// timer queue reads it on each set and on each dispatch, and the drivers wake at least every
// kMaximumSleep (one hour) even when the next expiry is further away.
//
// Thread safety: GetTickCount may be called from any number of threads. It is lock-free: the last
// 64-bit value is kept in an atomic and advanced with compare-and-swap. The source is read *after*
// loading the last value, so the source reading is never older than the one that produced the
// last value, and the modulo-2^32 difference is never "negative".
class WrappingTickAdapter final : public ITickProvider {
 public:
  explicit WrappingTickAdapter(const IWrappingTickSource& source);

  Ticks GetTickCount() const override;
  Ticks ReadingLagBound() const noexcept override;  // the source's

 private:
  const IWrappingTickSource& m_source;
  mutable std::atomic<Ticks> m_last;
};

}  // namespace timerwheel
