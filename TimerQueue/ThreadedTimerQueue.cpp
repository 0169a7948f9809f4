#include "TimerQueue/ThreadedTimerQueue.h"

#include <stdexcept>

#include "TimerQueue/Detail/RunDispatch.h"

namespace timerwheel {
namespace {

IManageTimerQueue& Require(const std::unique_ptr<IManageTimerQueue>& queue) {
  if (!queue) throw std::invalid_argument("ThreadedTimerQueue: the queue to own is null");
  return *queue;
}

}  // namespace

ThreadedTimerQueue::ThreadedTimerQueue(IManageTimerQueue& queue, ThreadedTimerQueueOptions options)
    : DispatchThread(queue, options.monitor), m_options(std::move(options)) {
  StartThread();
}

ThreadedTimerQueue::ThreadedTimerQueue(std::unique_ptr<IManageTimerQueue> queue,
                                       ThreadedTimerQueueOptions options)
    : ThreadedTimerQueue(Require(queue), std::move(options)) {
  m_owned = std::move(queue);  // only keeps it alive: everything else uses m_queue
}

ThreadedTimerQueue::~ThreadedTimerQueue() { StopThread(); }

void ThreadedTimerQueue::Dispatch(Lock& lock) {
  detail::RunDispatch(m_queue, lock, m_options.dispatchPolicy, m_options.onCallbackError,
                      [this] { return ShutdownRequested(); });
}

}  // namespace timerwheel
