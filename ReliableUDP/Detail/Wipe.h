// Wiping secrets from memory as soon as nothing needs them: key material left in freed heap or in
// a dead stack frame is there for whatever later reads that memory (a core dump, a swapped page,
// a bug that reads out of bounds).
#pragma once

#include <cstddef>
#include <type_traits>

namespace timerwheel::rudp::detail {

// Zeroes `size` bytes at `data` in a way the compiler cannot drop as a dead store (libsodium's
// sodium_memzero; a plain memset of memory about to die may be optimised away).
void WipeBytes(void* data, std::size_t size) noexcept;

// Wipes a secret held in a plain array (a DH result) when the scope holding it ends, whichever
// way it ends: a return on any path, or an exception. For the key structs, which wipe themselves
// in their destructors, it is not needed.
template <class Secret>
class WipeAtScopeExit {
  static_assert(std::is_trivially_copyable_v<Secret>, "wiped as bytes");

 public:
  explicit WipeAtScopeExit(Secret& secret) noexcept : m_secret(secret) {}
  ~WipeAtScopeExit() { WipeBytes(&m_secret, sizeof m_secret); }
  WipeAtScopeExit(const WipeAtScopeExit&) = delete;
  WipeAtScopeExit& operator=(const WipeAtScopeExit&) = delete;

 private:
  Secret& m_secret;
};

}  // namespace timerwheel::rudp::detail
