// WipeBytes: libsodium's sodium_memzero, so that no header of the engine includes <sodium.h>.
#include "ReliableUDP/Detail/Wipe.h"

#include <sodium.h>

namespace timerwheel::rudp::detail {

void WipeBytes(void* data, std::size_t size) noexcept { sodium_memzero(data, size); }

}  // namespace timerwheel::rudp::detail
