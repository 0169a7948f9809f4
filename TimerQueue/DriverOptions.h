// The options every timer driver shares (ThreadedTimerQueue, AsioTimerQueue, IocpTimerQueue).
#pragma once

#include "TimerQueue/CallbackErrorHandler.h"
#include "TimerQueue/DispatchPolicy.h"
#include "TimerQueue/ITimerQueueMonitor.h"

namespace timerwheel {

// Where a driver reports a throwing callback and who hears of its wake-ups.
struct DriverOptions {
  CallbackErrorHandler onCallbackError;   // empty: ReportCallbackErrorToStderr
  ITimerQueueMonitor* monitor = nullptr;  // receives OnDispatchWakeUp; not owned
};

// A driver that can run callbacks with or without its lock (ThreadedTimerQueue, AsioTimerQueue;
// IocpTimerQueue always runs them without it).
struct LockingDriverOptions : DriverOptions {
  DispatchPolicy dispatchPolicy = DispatchPolicy::WithoutLock;
};

}  // namespace timerwheel
