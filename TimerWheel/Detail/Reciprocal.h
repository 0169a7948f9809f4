// Division of 32-bit numbers by a divisor fixed at run time, as a multiply and a shift.
#pragma once

#include <cstdint>

#if defined(_MSC_VER) && !defined(__clang__) && defined(_M_X64)
#include <intrin.h>
#endif

namespace timerwheel::detail {

#if defined(__SIZEOF_INT128__)
using Uint128 = __uint128_t;  // GCC's and Clang's built-in name: no -Wpedantic warning
#endif

// n / d for every 32-bit n, exactly, by one 64x64->128 multiply: with
// m = floor((2^64 - 1) / d) + 1, n / d = floor(m * n / 2^64) (Lemire, Kaser and Kurz, "Faster
// remainder by direct computation", 2019, section 5: exact for all 32-bit n and d). A hardware
// 32-bit divide costs 20-30 cycles on the wheel's hot path; this is a multiply of 3-4.
class Reciprocal {
 public:
  explicit Reciprocal(std::uint32_t divisor) noexcept
      : m_multiplier(~std::uint64_t{0} / divisor + 1), m_divisor(divisor) {}

  std::uint32_t Divide(std::uint32_t n) const noexcept {
    if (m_multiplier == 0) return n;  // d == 1: 2^64 does not fit (a branch that never changes)
#if defined(__SIZEOF_INT128__)
    return static_cast<std::uint32_t>((static_cast<Uint128>(m_multiplier) * n) >> 64);
#elif defined(_MSC_VER) && !defined(__clang__) && defined(_M_X64)
    return static_cast<std::uint32_t>(__umulh(m_multiplier, n));
#else
    return n / m_divisor;
#endif
  }

  std::uint32_t Divisor() const noexcept { return m_divisor; }

 private:
  std::uint64_t m_multiplier;  // floor((2^64 - 1) / d) + 1; 0 for d == 1 (2^64 wrapped)
  std::uint32_t m_divisor;
};

}  // namespace timerwheel::detail
