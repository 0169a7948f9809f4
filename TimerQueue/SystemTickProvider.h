// The default tick provider: the operating system's monotonic millisecond clock.
#pragma once

#include "TimerQueue/ITickProvider.h"

namespace timerwheel {

// GetTickCount64() on Windows, std::chrono::steady_clock elsewhere. Stateless and thread-safe.
class SystemTickProvider final : public ITickProvider {
 public:
  Ticks GetTickCount() const override;

  // A process-wide instance, used by queues constructed without a provider.
  static const SystemTickProvider& Instance() noexcept;
};

}  // namespace timerwheel
