#include "TimerQueue/WrappingTickAdapter.h"

namespace timerwheel {

WrappingTickAdapter::WrappingTickAdapter(const IWrappingTickSource& source)
    : m_source(source), m_last(source.GetTickCount32()) {}

Ticks WrappingTickAdapter::GetTickCount() const {
  Ticks last = m_last.load(std::memory_order_acquire);
  for (;;) {
    const std::uint32_t now32 = m_source.GetTickCount32();
    const std::uint32_t elapsed = now32 - static_cast<std::uint32_t>(last);  // modulo 2^32
    const Ticks now = last + elapsed;
    if (elapsed == 0 || m_last.compare_exchange_weak(last, now, std::memory_order_acq_rel,
                                                     std::memory_order_acquire)) {
      return now;
    }
    // Another thread advanced m_last (now in `last`); read the source again, after it.
  }
}

Ticks WrappingTickAdapter::ReadingLagBound() const noexcept { return m_source.ReadingLagBound(); }

}  // namespace timerwheel
