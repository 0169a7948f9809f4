// Division of 32-bit numbers, rounding up, by a divisor fixed at run time: a multiply and a shift.
#pragma once

#include <cstdint>

#if defined(_MSC_VER) && !defined(__clang__) && defined(_M_X64)
#include <intrin.h>
#endif

namespace timerwheel::detail {

#if defined(__SIZEOF_INT128__)
using Uint128 = __uint128_t;  // GCC's and Clang's built-in name: no -Wpedantic warning
#endif

// ceil(n / d) for every 32-bit n and d with n + d - 1 < 2^32, by one 64x64->128 multiply and no
// branch: with m = floor((2^64 - 1) / d), floor(k / d) = floor(m * (k + 1) / 2^64) for every
// 32-bit k (write m = (2^64 - e) / d with 1 <= e <= d, k = q * d + s: m * (k + 1) / 2^64 is
// q + (s + 1) / d - e * (k + 1) / (d * 2^64), and the last term is below 1 / d), so with
// k = n + d - 1 the multiplier's argument is n + d. The round-up form is what the wheel needs
// (the first slot boundary at or after a deadline), and d = 1 needs no special case (m = 2^64 - 1
// fits, where the round-up multiplier floor((2^64 - 1) / d) + 1 would not). A hardware 32-bit
// divide costs 20-30 cycles on the wheel's hot path; this is a multiply of 3-4.
class Reciprocal {
 public:
  explicit Reciprocal(std::uint32_t divisor) noexcept
      : m_multiplier(~std::uint64_t{0} / divisor), m_divisor(divisor) {}

  std::uint32_t DivideRoundingUp(std::uint32_t n) const noexcept {
    return static_cast<std::uint32_t>(
        DivideSuccessor(std::uint64_t{n} + m_divisor));  // (n + d - 1) + 1
  }

  // floor((successor - 1) / d) for 1 <= successor <= 2^32: ceil(n / d) is this of n + d, and a
  // caller that has n + d at hand (the wheel: deadline - (cursor start - g)) saves the add. The
  // quotient is below 2^32, but returned in 64 bits: it is the multiply's high half as it comes,
  // and a caller adding it to a 64-bit slot number then needs no zero-extending move.
  std::uint64_t DivideSuccessor(std::uint64_t successor) const noexcept {
#if defined(__SIZEOF_INT128__)
    return static_cast<std::uint64_t>((static_cast<Uint128>(m_multiplier) * successor) >> 64);
#elif defined(_MSC_VER) && !defined(__clang__) && defined(_M_X64)
    return __umulh(m_multiplier, successor);
#else
    return (successor - 1) / m_divisor;
#endif
  }

 private:
  std::uint64_t m_multiplier;  // floor((2^64 - 1) / d)
  std::uint64_t m_divisor;     // d, 64-bit so that n + d needs no widening on the hot path
};

}  // namespace timerwheel::detail
