// Test clocks whose time moves only when the test says so.
#pragma once

#include <atomic>
#include <cstdint>
#include <stdexcept>

#include "TimerQueue/ITickProvider.h"
#include "TimerQueue/WrappingTickAdapter.h"

namespace timerwheel::test {

// Starts at an odd, non-zero time so that nothing accidentally depends on time 0 or on the start
// being a multiple of a wheel's granularity. Counts reads, so tests can assert "no clock read".
class ManualTickProvider final : public ITickProvider {
 public:
  static constexpr Ticks kDefaultStart = 1'000'000'007;

  explicit ManualTickProvider(Ticks start = kDefaultStart) : m_now(start) {}

  Ticks GetTickCount() const override {
    m_reads.fetch_add(1, std::memory_order_relaxed);
    return m_now.load(std::memory_order_acquire);
  }

  Ticks Now() const noexcept { return m_now.load(std::memory_order_acquire); }
  void Advance(Ticks milliseconds) noexcept {
    m_now.fetch_add(milliseconds, std::memory_order_acq_rel);
  }
  void SetTime(Ticks now) {
    if (now < Now()) throw std::logic_error("ManualTickProvider: time must not go backwards");
    m_now.store(now, std::memory_order_release);
  }
  std::uint64_t Reads() const noexcept { return m_reads.load(std::memory_order_relaxed); }

 private:
  std::atomic<Ticks> m_now;
  mutable std::atomic<std::uint64_t> m_reads{0};
};

// A GetTickCount()-style 32-bit counter, for testing WrappingTickAdapter across the wrap.
class ManualWrappingTickSource final : public IWrappingTickSource {
 public:
  explicit ManualWrappingTickSource(std::uint32_t start) : m_now(start) {}
  std::uint32_t GetTickCount32() const override { return m_now.load(std::memory_order_acquire); }
  void Advance(std::uint32_t milliseconds) noexcept {
    m_now.fetch_add(milliseconds, std::memory_order_acq_rel);  // wraps modulo 2^32
  }

 private:
  std::atomic<std::uint32_t> m_now;
};

}  // namespace timerwheel::test
