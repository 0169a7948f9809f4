// The ITimerQueue/IManageTimerQueue machinery shared by the heap and the wheel: handles, the
// record pool, argument checks and the dual-data dispatch. Only the schedule differs.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "TimerQueue/Core/TimerPool.h"
#include "TimerQueue/IManageTimerQueue.h"
#include "TimerQueue/ITickProvider.h"
#include "TimerQueue/ITimerQueueMonitor.h"

namespace timerwheel::detail {

// A Scheduler orders pending records by deadline. It owns the record pool (a member, not a
// reference: the hot path then reaches the records with one load fewer, and the compiler sees
// that the queue's and the scheduler's accesses are the same) and keeps its per-record state in
// the hot record's `node`. Required members (ids are pool indices):
//   using Node = ...;                                   // embedded in each hot record
//   Scheduler(Args...);
//   TimerPool<Node>& Pool() noexcept;                   // and const
//   void Reserve(std::size_t records);                  // so that Schedule never allocates
//   bool IsScheduled(std::uint32_t id) const noexcept;  // pending: from the node alone
//   bool MustAdvance(Ticks now) const noexcept;  // AdvanceTo(now) has work to do
//   void AdvanceTo(Ticks now) noexcept;          // catch up with the clock; before (Re)Schedule
//   bool Schedule(std::uint32_t id, Ticks deadline) noexcept;    // id not scheduled
//   bool Reschedule(std::uint32_t id, Ticks deadline) noexcept;  // id scheduled
//   (deadline computed from a reading `now` the scheduler has been advanced to: now + timeout
//   + the clock's lag bound, or now + timeout where the scheduler adds the lag bound itself)
//   static constexpr bool kAddsLagBound;                // which of the two (DeadlineFor)
//   std::size_t Unschedule(std::uint32_t id) noexcept;          // id scheduled
//   (Schedule and Reschedule return whether they left an entry out of order, which Settle()
//   must put right before any other call; Unschedule returns the position of such an entry, or
//   kSettled, for Settle(position). The queue makes that call out of line, as its last step, so
//   that the common path saves no registers for it. A set's test is the scheduler's own branch
//   when the result is a bool (a position would need a compare with kSettled, which GCC shares
//   with the common path's return); a cancel's position stays in a register.)
//   void Settle() noexcept;
//   static constexpr std::size_t kSettled;
//   void Settle(std::size_t position) noexcept;
//   Ticks DeadlineOf(std::uint32_t id) const noexcept;  // a scheduled id's deadline: only
//                                      // where Node::kRecordHoldsDeadline is false (TimerPool.h)
//   std::size_t Size() const noexcept;
//   Ticks NextExpiry() noexcept;              // Size() > 0: when the first timer fires
//                                             // (0: something is due already)
//   template <class F> void DetachDue(Ticks now, F onDue);  // unschedule each due id, in
//                                             // firing order (ties: set order), calling onDue(id)
//   Milliseconds MaximumTimeout() const noexcept;
//   void CheckInvariants() const;             // throws std::logic_error
//
// The dispatch batch holds the timed-out copy of each detached timer's data. It lives in the batch
// rather than in the record because one record can have two undispatched expiries: End with
// callbacks left over keeps them due, and meanwhile the timer may be re-set and expire again.
//
// Thread safety: none here (see IManageTimerQueue). HandleTimeout reads only m_batch,
// m_batchPosition, m_handlingDepth and m_dispatching (m_handlingDepth is the dispatching
// thread's alone: End, which reads it, runs on that thread); every other member is touched only by
// calls made under the driver's lock, and m_batch is changed only by Begin and End.
template <class Scheduler>
class BasicTimerQueue : public IManageTimerQueue {
 public:
  using Node = typename Scheduler::Node;

  BasicTimerQueue(const BasicTimerQueue&) = delete;
  BasicTimerQueue& operator=(const BasicTimerQueue&) = delete;

  // Nothing fires. Every record still allocated (pending, unset, one-shot, or awaiting dispatch)
  // is reported to the monitor as deleted.
  ~BasicTimerQueue() override {
    if (m_monitor)
      Pool().ForEachAllocated([this](std::uint32_t, auto&) { m_monitor->OnTimerDeleted(); });
  }

  TimerHandle CreateTimer() override {
    const std::uint32_t id = AllocateRecord();
    if (m_monitor) m_monitor->OnTimerCreated();
    return Pool().HandleOf(id);
  }

  bool TimerIsSet(TimerHandle handle) const override {
    return m_scheduler.IsScheduled(Pool().IdOf(handle));
  }

  // The set path makes no call when the provider has a ReadingCounter: the clock is one load, and
  // the rare steps (the wheel's cursor advance, a monitor report, a throw) are calls out of line
  // that the common path jumps over, so it saves and restores no registers. A queue with such a
  // clock and no monitor takes a path that tests for neither, chosen by the handle's bounds check
  // itself: m_plainSetLimit is the pool's size for such a queue and 0 for every other, so any
  // other queue, and a handle that is not live, go to SetTimerInGeneral (which throws for the
  // latter).
  TIMERWHEEL_INLINE_FOR_DIRECT_CALLS bool SetTimer(TimerHandle handle, ITimer& timer,
                                                   Milliseconds timeout, UserData userData,
                                                   SetIf setIf = SetIf::Always) override {
    std::uint32_t id;
    if (!Pool().FindBelow(m_plainSetLimit, handle, id))
      return SetTimerInGeneral(handle, timer, timeout, userData, setIf);
    return SetTimerAt</*kMayReport=*/false>(handle, id, timer, timeout, userData, setIf,
                                            m_tickCounter->load(std::memory_order_relaxed));
  }

  bool UpdateTimer(TimerHandle handle, ITimer& timer, Milliseconds timeout, UserData userData,
                   UpdateIf updateIf = UpdateIf::Always, bool* wasUpdated = nullptr) override {
    const std::uint32_t id = Pool().IdOf(handle);
    CheckTimeout(timeout);
    auto& record = Pool()[id];
    const bool wasPending = m_scheduler.IsScheduled(id);
    bool updated = true;
    if (wasPending && updateIf == UpdateIf::AlwaysNoTimeoutChange) {
      record.active = {&timer, userData};  // keeps deadline and firing order
    } else {
      const Ticks now = Now();
      m_scheduler.AdvanceTo(now);
      const Ticks deadline = DeadlineFor(now, timeout);
      if (wasPending) {
        const Ticks current = PendingDeadline(id);
        updated = updateIf == UpdateIf::Always ||
                  (updateIf == UpdateIf::NewTimeIsSooner && deadline < current) ||
                  (updateIf == UpdateIf::NewTimeIsLater && deadline > current);
      }
      if (updated) SettleIf(Arm(id, timer, userData, deadline, wasPending));
    }
    if (wasUpdated) *wasUpdated = updated;
    if (m_monitor) m_monitor->OnTimerUpdated(wasPending, updated);
    return wasPending;
  }

  // Touches only the hot record: the active data of a timer that is not pending is never read,
  // so it is left as it was rather than cleared (a cancel then costs no cold-line access). In a
  // queue without a monitor (m_plainCancelLimit: the pool's size, else 0), a live handle takes a
  // path with no monitor test; the rest go to CancelTimerInGeneral.
  TIMERWHEEL_INLINE_FOR_DIRECT_CALLS bool CancelTimer(TimerHandle handle) override {
    std::uint32_t id;
    if (!Pool().FindBelow(m_plainCancelLimit, handle, id)) return CancelTimerInGeneral(handle);
    if (!m_scheduler.IsScheduled(id)) return false;
    const std::size_t unsettled = m_scheduler.Unschedule(id);
    if (unsettled != Scheduler::kSettled) return CancelTimerSettling(unsettled);
    return true;
  }

  // A cancel in a queue with a monitor, or of a handle that is not live (IdOf throws).
  TIMERWHEEL_NEVER_INLINE bool CancelTimerInGeneral(TimerHandle handle) {
    const std::uint32_t id = Pool().IdOf(handle);
    if (!m_scheduler.IsScheduled(id)) return m_monitor == nullptr ? false : ReportCancelled(false);
    const std::size_t unsettled = m_scheduler.Unschedule(id);
    if (unsettled != Scheduler::kSettled) return CancelTimerSettling(unsettled);
    return m_monitor == nullptr ? true : ReportCancelled(true);
  }

  bool DestroyTimer(TimerHandle& handle) override {
    const std::uint32_t id = Pool().IdOf(handle);
    // A record still referenced by the dispatch batch is freed by EndTimeoutHandling. Noted
    // first: the only step that may throw (it may allocate), before anything has changed.
    const bool deferred = Pool().LastBatchEntry(id) >= m_firstBatchEntry;
    if (deferred) m_deferredFrees.push_back(id);
    const bool wasPending = m_scheduler.IsScheduled(id);
    if (wasPending) {
      const std::size_t unsettled = m_scheduler.Unschedule(id);
      if (unsettled != Scheduler::kSettled) m_scheduler.Settle(unsettled);
    }
    Pool().Release(id);
    if (!deferred) FreeRecord(id);
    handle = TimerHandle{};
    if (m_monitor) m_monitor->OnTimerDestroyed(wasPending);
    return wasPending;
  }

  void SetOneShotTimer(ITimer& timer, Milliseconds timeout, UserData userData) override {
    CheckTimeout(timeout);
    const Ticks now = Now();  // first: a clock that throws leaves no record behind
    m_scheduler.AdvanceTo(now);
    const std::uint32_t id = AllocateRecord();
    Pool().Release(id);  // no handle: freed by EndTimeoutHandling once it has fired
    ++m_pendingOneShots;
    SettleIf(Arm(id, timer, userData, DeadlineFor(now, timeout), /*wasPending=*/false));
    if (m_monitor) m_monitor->OnOneShotTimerCreated();
  }

  Milliseconds GetMaximumTimeout() const override { return m_scheduler.MaximumTimeout(); }

  Milliseconds GetNextTimeout() noexcept override {
    const Ticks next = GetNextExpiry();
    if (next == kNoExpiry) return kInfinite;
    if (next == 0) return 0;
    const Ticks now = Now();
    if (next <= now) return 0;
    return static_cast<Milliseconds>(std::min<Ticks>(next - now, kInfinite - 1));
  }

  Ticks GetNextExpiry() noexcept override {
    if (m_hasLeftovers) return 0;
    if (m_scheduler.Size() == 0) return kNoExpiry;
    return m_scheduler.NextExpiry();
  }

  bool BeginTimeoutHandling() override {
    if (m_dispatching) {
      throw std::logic_error("BeginTimeoutHandling: a dispatch is already in progress");
    }
    if (m_scheduler.Size() != 0) {
      // Reserve up front (amortised doubling) so that detaching can never fail half-way.
      m_batch.Reserve(m_batch.Size() + m_scheduler.Size());
      // Every one-shot that may be detached: only one-shots are released and still scheduled.
      const std::size_t frees = m_deferredFrees.size() + m_pendingOneShots;
      if (frees > m_deferredFrees.capacity())
        m_deferredFrees.reserve((std::max)(frees, 2 * m_deferredFrees.capacity()));
      std::uint64_t entry = m_firstBatchEntry + m_batch.Size();  // the number of the next one
      BatchEntry* added = m_batch.End();                         // reserved above
      const std::size_t deferredBefore = m_deferredFrees.size();
      const auto records = Pool().Arrays();  // DetachDue allocates no record
      m_scheduler.DetachDue(Now(), [&](std::uint32_t id) {
        auto& record = records[id];  // the scheduler has marked it not scheduled
        records.LastBatchEntry(id) = entry++;
        if ((record.flags & kHandleReleased) != 0) DeferOneShotFree(id);  // End frees it
        *added++ = {record.active};
      });
      m_batch.Added(added);
      m_pendingOneShots -= m_deferredFrees.size() - deferredBefore;
    }
    m_hasLeftovers = false;
    m_dispatching = m_batch.Size() != 0;
    return m_dispatching;
  }

  std::size_t HandleTimeout(std::size_t budget = SIZE_MAX) override {
    if (!m_dispatching) {
      throw std::logic_error(
          "HandleTimeout called outside BeginTimeoutHandling/EndTimeoutHandling");
    }
    // Callbacks may call any ITimerQueue method but not Begin or End, so the batch does not
    // change while this runs: its entries and size are read once, not after every callback. The
    // position is read again after each one: a callback may itself call HandleTimeout.
    // (If a callback's own HandleTimeout runs entries of this call's range, this call runs
    // fewer than `budget`: "up to".)
    const BatchEntry* const entries = m_batch.Data();
    const std::size_t available = m_batch.Size() - m_batchPosition;
    const std::size_t end = m_batchPosition + (budget < available ? budget : available);
    ITimerQueueMonitor* const monitor = m_monitor;
    // While callbacks run, End refuses (it would move the batch from under this loop); counted
    // so that a callback's own HandleTimeout nests, and undone when a callback throws.
    ++m_handlingDepth;
    const struct DepthGuard {
      std::size_t& depth;
      ~DepthGuard() { --depth; }
    } depthGuard{m_handlingDepth};
    std::size_t handled = 0;
    for (std::size_t position = m_batchPosition; position < end; position = m_batchPosition) {
      const TimerData expired = entries[position].expired;
      // Advance first: if the callback throws, the next call continues after it.
      m_batchPosition = position + 1;
      ++handled;
      if (monitor) monitor->OnTimerFired();
      expired.timer->OnTimer(expired.userData);
    }
    return handled;
  }

  void EndTimeoutHandling() override {
    if (!m_dispatching) {
      throw std::logic_error("EndTimeoutHandling without a matching BeginTimeoutHandling");
    }
    if (m_handlingDepth != 0) {
      throw std::logic_error("EndTimeoutHandling called from a timer callback");
    }
    // Only released records (destroyed during the dispatch, one-shots) are freed here, once no
    // entry left in the batch names them (a record named twice is freed after its last entry);
    // the batch itself is not walked again.
    const std::uint64_t firstLeft = m_firstBatchEntry + m_batchPosition;
    if (!m_deferredFrees.empty()) {
      std::size_t kept = 0;
      for (const std::uint32_t id : m_deferredFrees) {
        if (Pool().LastBatchEntry(id) < firstLeft && !m_scheduler.IsScheduled(id)) {
          FreeRecord(id);
        } else {
          m_deferredFrees[kept++] = id;
        }
      }
      m_deferredFrees.resize(kept);
    }
    m_firstBatchEntry = firstLeft;
    // Undispatched expiries stay at the front, so they fire first at the next Begin.
    m_batch.DropFront(m_batchPosition);
    m_batchPosition = 0;
    m_dispatching = false;
    m_hasLeftovers = m_batch.Size() != 0;
  }

  // Debug aid for tests: verifies the pool, the batch and the schedule agree. Throws
  // std::logic_error naming the values involved.
  void CheckInvariants() const {
    // The batch's entries name no records (the timed-out copies are all HandleTimeout reads), so
    // what is checked against it is each record's last batch entry: within the batch's numbers,
    // each number named by one record at most, and the records the batch names while released
    // exactly those whose frees are deferred.
    std::size_t pending = 0;
    std::vector<std::uint8_t> entryNamed(m_batch.Size(), 0);
    std::vector<std::uint8_t> freeDeferred(Pool().Size(), 0);
    for (const std::uint32_t id : m_deferredFrees) {
      if (id >= Pool().Size() || freeDeferred[id] != 0)
        Fail("deferred free of record " + std::to_string(id) + " is out of range or listed twice");
      freeDeferred[id] = 1;
    }
    for (std::uint32_t id = 0; id < Pool().Size(); ++id) {
      const auto& record = Pool()[id];
      const std::uint64_t lastBatchEntry = Pool().LastBatchEntry(id);
      const bool named = (record.flags & kAllocated) && lastBatchEntry >= m_firstBatchEntry;
      if (named) {
        const std::uint64_t position = lastBatchEntry - m_firstBatchEntry;
        if (position >= m_batch.Size() || entryNamed[position] != 0) {
          Fail("record " + std::to_string(id) + " has last batch entry " +
               std::to_string(lastBatchEntry) + ", but the batch holds entries " +
               std::to_string(m_firstBatchEntry) + " to " +
               std::to_string(m_firstBatchEntry + m_batch.Size() - 1) +
               " or another record names that entry");
        }
        entryNamed[position] = 1;
      }
      const bool released =
          (record.flags & (kAllocated | kHandleReleased)) == (kAllocated | kHandleReleased);
      if ((released && named) != (freeDeferred[id] != 0)) {
        Fail("record " + std::to_string(id) + (released ? " (released)" : "") +
             (named ? " is named by the batch" : " is not named by the batch") +
             (freeDeferred[id] != 0 ? " but its free is deferred"
                                    : " but its free is not deferred"));
      }
      const bool handleLive = (record.flags & (kAllocated | kHandleReleased)) == kAllocated;
      if (Pool().HotOf(id).key != (handleLive ? record.generation : kNoHandle)) {
        Fail("record " + std::to_string(id) + " has key " + std::to_string(Pool().HotOf(id).key) +
             " with generation " + std::to_string(record.generation) + " and flags " +
             std::to_string(record.flags));
      }
      if (!(record.flags & kAllocated)) {
        if (record.flags != 0) Fail("free record " + std::to_string(id) + " has flags");
        if (m_scheduler.IsScheduled(id)) Fail("free record " + std::to_string(id) + " is pending");
        continue;
      }
      const bool isPending = m_scheduler.IsScheduled(id);
      if (isPending) {
        ++pending;
        if (record.active.timer == nullptr)
          Fail("pending record " + std::to_string(id) + " has no timer");
      }
      if ((record.flags & kHandleReleased) && !isPending && !named) {
        Fail("released record " + std::to_string(id) + " was not freed");
      }
    }
    if (pending != m_scheduler.Size()) {
      Fail(std::to_string(pending) + " pending records but the schedule holds " +
           std::to_string(m_scheduler.Size()));
    }
    m_scheduler.CheckInvariants();
  }

 protected:
  template <class... SchedulerArgs>
  BasicTimerQueue(const ITickProvider& ticks, ITimerQueueMonitor* monitor,
                  std::size_t initialCapacity, SchedulerArgs&&... schedulerArgs)
      : m_ticks(ticks),
        m_tickCounter(ticks.ReadingCounter()),
        m_deadlineMargin(CheckLagBound(ticks.ReadingLagBound())),
        m_monitor(monitor),
        m_plainSets(m_tickCounter != nullptr && monitor == nullptr),
        m_scheduler(std::forward<SchedulerArgs>(schedulerArgs)...) {
    // The pool's ids are 32-bit, kNoIndex excluded: a larger reservation could never be used.
    if (initialCapacity >= kNoIndex) {
      throw std::invalid_argument("timer queue: initialCapacity " +
                                  std::to_string(initialCapacity) + " exceeds the most timers, " +
                                  std::to_string(kNoIndex - 1));
    }
    if (initialCapacity != 0) {
      Pool().Reserve(initialCapacity);
      m_scheduler.Reserve(Pool().Capacity());
      m_batch.Reserve(initialCapacity);
    }
  }

  const Scheduler& GetScheduler() const noexcept { return m_scheduler; }

 private:
  TimerPool<Node>& Pool() noexcept { return m_scheduler.Pool(); }
  const TimerPool<Node>& Pool() const noexcept { return m_scheduler.Pool(); }

 private:
  // The timed-out copy alone (16 bytes): End finds the records to free in m_deferredFrees, so the
  // batch that Begin writes and HandleTimeout reads back names no record.
  struct BatchEntry {
    TimerData expired;
  };

  // The batch's storage: an array with a count rather than a vector, so that Begin appends
  // through a local pointer into room reserved up front (a vector's push_back stores its end
  // after every entry, and the compiler then reloads the pool's arrays, which that store might
  // alias, for the next one).
  class Batch {
   public:
    std::size_t Size() const noexcept { return m_size; }
    const BatchEntry* Data() const noexcept { return m_entries.get(); }
    // Where entries are added, up to the room Reserve made; Added(end) takes them in.
    BatchEntry* End() noexcept { return m_entries.get() + m_size; }
    void Added(const BatchEntry* end) noexcept {
      m_size = static_cast<std::size_t>(end - m_entries.get());
    }
    // Room for `count` entries in all (growing at least twofold); the entries are kept.
    void Reserve(std::size_t count) {
      if (count <= m_capacity) return;
      const std::size_t capacity = (std::max)(count, 2 * m_capacity);
      std::unique_ptr<BatchEntry[]> entries(new BatchEntry[capacity]);
      std::copy(Data(), Data() + m_size, entries.get());
      m_entries = std::move(entries);
      m_capacity = capacity;
    }
    // The first `count` entries go; the rest move to the front, in order.
    void DropFront(std::size_t count) noexcept {
      std::copy(Data() + count, Data() + m_size, m_entries.get());
      m_size -= count;
    }

   private:
    std::unique_ptr<BatchEntry[]> m_entries;
    std::size_t m_size = 0;
    std::size_t m_capacity = 0;
  };

  [[noreturn]] static void Fail(const std::string& what) {
    throw std::logic_error("timer queue invariant violated: " + what);
  }

  // A lag bound of 2^32 ms or more (a provider's mistake: it is a few ticks) wrapped the deadline
  // arithmetic, and timers fired early.
  static Ticks CheckLagBound(Ticks lag) {
    if (lag >= kInfinite) {
      throw std::invalid_argument("timer queue: the clock's ReadingLagBound " +
                                  std::to_string(lag) + " ms must be below 2^32 - 1");
    }
    return lag;
  }

  // Every deadline is computed here: the instant from which a timer set at `now` with `timeout`
  // may fire. It adds the provider's lag bound L (ITickProvider::ReadingLagBound): the true instant
  // of the set is before now + L, so the timer never fires before `timeout` has passed in real
  // time. A scheduler that adds L itself (Scheduler::kAddsLagBound: the wheel folds it into the
  // base it computes slots from, an add fewer per set) is given now + timeout; the deadlines the
  // queue compares (UpdateTimer's) are then all in those terms, which orders them the same.
  Ticks DeadlineFor(Ticks now, Milliseconds timeout) const noexcept {
    if constexpr (Scheduler::kAddsLagBound) {
      return now + timeout;
    } else {
      return now + timeout + m_deadlineMargin;
    }
  }

  void CheckTimeout(Milliseconds timeout) const {
    if (timeout > m_scheduler.MaximumTimeout()) RejectTimeout(timeout);
  }

  // The throws, out of line so that the checks on the hot path stay a compare and a branch, and
  // declared to return a result so that SetTimer jumps to them rather than calls them: with no
  // call left on its path, it needs no stack frame. (Their bodies are throw expressions, so that
  // no compiler asks for a return after them.)
  TIMERWHEEL_REJECT static bool RejectHandle(TimerHandle handle) {
    throw InvalidTimerHandle(handle);
  }
  // It reads the maximum itself: a set passing it would hold it in a register to compare with,
  // where it compares with the member in memory.
  TIMERWHEEL_REJECT bool RejectTimeout(Milliseconds timeout) const {
    throw std::out_of_range("timeout " + std::to_string(timeout) + " ms exceeds the maximum of " +
                            std::to_string(m_scheduler.MaximumTimeout()) + " ms");
  }

  std::uint32_t AllocateRecord() {
    const std::uint32_t id = Pool().Allocate();
    try {
      m_scheduler.Reserve(Pool().Capacity());  // no-op unless the pool just grew
    } catch (...) {
      Pool().Free(id);
      throw;
    }
    // The pool only grows: the limits follow its size (below 2^32: its ids are 32-bit). Cast: MSVC
    // rejects the implicit size_t -> uint32_t at /W4 /WX (C4267).
    const auto size = static_cast<std::uint32_t>(Pool().Size());
    if (m_plainSets) m_plainSetLimit = size;
    if (m_monitor == nullptr) m_plainCancelLimit = size;
    return id;
  }

  Ticks Now() const {
    return m_tickCounter != nullptr ? m_tickCounter->load(std::memory_order_relaxed)
                                    : m_ticks.GetTickCount();
  }

  // `id` is the record the live `handle` names. kMayReport: whether there may be a monitor to
  // report to (false only on the plain path).
  template <bool kMayReport>
  TIMERWHEEL_ALWAYS_INLINE bool SetTimerAt(TimerHandle handle, std::uint32_t id, ITimer& timer,
                                           Milliseconds timeout, UserData userData, SetIf setIf,
                                           Ticks now) {
    if (timeout > m_scheduler.MaximumTimeout()) return RejectTimeout(timeout);
    if (m_scheduler.MustAdvance(now))
      return SetTimerAfterAdvance(handle, timer, timeout, userData, setIf);
    const bool wasPending = m_scheduler.IsScheduled(id);
    if (!(wasPending && setIf == SetIf::NotSet)) {
      if (Arm(id, timer, userData, DeadlineFor(now, timeout), wasPending))
        return wasPending ? SetTimerSettling<true>() : SetTimerSettling<false>();
    }
    if constexpr (kMayReport) {
      if (m_monitor != nullptr) return ReportSet(wasPending);
    }
    return wasPending;
  }

  // The rest of a set or cancel whose schedule needs its order restored (a heap's sift): out of
  // line and returning the result, so that the caller tail-calls it.
  template <bool kWasPending>
  TIMERWHEEL_NEVER_INLINE bool SetTimerSettling() {
    m_scheduler.Settle();
    return m_monitor == nullptr ? kWasPending : ReportSet(kWasPending);
  }
  TIMERWHEEL_NEVER_INLINE bool CancelTimerSettling(std::size_t unsettled) {
    m_scheduler.Settle(unsettled);
    return m_monitor == nullptr ? true : ReportCancelled(true);
  }

  void SettleIf(bool unsettled) noexcept {
    if (unsettled) m_scheduler.Settle();
  }

  TIMERWHEEL_NEVER_INLINE bool SetTimerInGeneral(TimerHandle handle, ITimer& timer,
                                                 Milliseconds timeout, UserData userData,
                                                 SetIf setIf) {
    std::uint32_t id;
    if (!Pool().Find(handle, id)) return RejectHandle(handle);
    return SetTimerAt</*kMayReport=*/true>(handle, id, timer, timeout, userData, setIf, Now());
  }

  // Validated already; advancing first cannot fail and changes nothing a caller can observe. It
  // reads the clock again (at most once per slot) rather than take `now` as a seventh argument,
  // which would go on the stack and turn the caller's jump here into a call.
  TIMERWHEEL_NEVER_INLINE bool SetTimerAfterAdvance(TimerHandle handle, ITimer& timer,
                                                    Milliseconds timeout, UserData userData,
                                                    SetIf setIf) {
    const Ticks now = Now();
    m_scheduler.AdvanceTo(now);
    return SetTimerAt</*kMayReport=*/true>(handle, Pool().IdOf(handle), timer, timeout, userData,
                                           setIf, now);
  }

  // Monitor reports out of line and returning the result, so the caller tail-calls them.
  TIMERWHEEL_NEVER_INLINE bool ReportSet(bool wasPending) {
    m_monitor->OnTimerSet(wasPending);
    return wasPending;
  }
  TIMERWHEEL_NEVER_INLINE bool ReportCancelled(bool wasPending) {
    m_monitor->OnTimerCancelled(wasPending);
    return wasPending;
  }

  // The scheduler has been advanced to the time `deadline` was computed from.
  // Returns whether the scheduler left an entry for Settle(). The record's deadline is written
  // only where the scheduler does not keep one (the heap's entries hold it already: a store
  // fewer per set).
  TIMERWHEEL_ALWAYS_INLINE bool Arm(std::uint32_t id, ITimer& timer, UserData userData,
                                    Ticks deadline, bool wasPending) noexcept {
    auto& record = Pool()[id];
    record.active = {&timer, userData};
    if constexpr (TimerPool<Node>::kRecordsHoldDeadlines) record.deadline = deadline;
    return wasPending ? m_scheduler.Reschedule(id, deadline) : m_scheduler.Schedule(id, deadline);
  }

  Ticks PendingDeadline(std::uint32_t id) const noexcept {
    if constexpr (TimerPool<Node>::kRecordsHoldDeadlines) {
      return Pool()[id].deadline;
    } else {
      return m_scheduler.DeadlineOf(id);
    }
  }

  // Out of line and taking the id by value: push_back takes a reference, and inlined into
  // Begin's loop it had the id stored to memory for every detached timer.
  TIMERWHEEL_NEVER_INLINE void DeferOneShotFree(std::uint32_t id) noexcept {
    m_deferredFrees.push_back(id);  // Begin reserved room for every pending one-shot
  }

  void FreeRecord(std::uint32_t id) noexcept {
    Pool().Free(id);
    if (m_monitor) m_monitor->OnTimerDeleted();
  }

  const ITickProvider& m_ticks;
  const std::atomic<Ticks>* const m_tickCounter;  // the provider's ReadingCounter, or null
  // The provider's ReadingLagBound: 1 for a clock floored to whole ms (a reading of 10 may be
  // 10.9: deadline now + timeout would be reached up to 1 ms early), the step and more for a
  // coarse clock, 0 for an exact one. A wheel sizes its ring for M + this margin.
  const Ticks m_deadlineMargin;
  ITimerQueueMonitor* const m_monitor;
  const bool m_plainSets;  // a ReadingCounter and no monitor
  // A live handle whose index is below this takes SetTimer's plain path: Pool().Size() when
  // m_plainSets, else 0 (so the bounds check is also the test for the path).
  std::uint32_t m_plainSetLimit = 0;
  std::uint32_t m_plainCancelLimit = 0;  // the same for CancelTimer: Pool().Size() if no monitor
  Scheduler m_scheduler;                 // owns the record pool

  Batch m_batch;                    // timed-out copies, in firing order
  std::size_t m_batchPosition = 0;  // next entry HandleTimeout runs
  std::size_t m_handlingDepth = 0;  // HandleTimeout calls running (nested by callbacks)
  // Entries are numbered from 1 in the order Begin adds them, never reused: m_batch[i] is entry
  // m_firstBatchEntry + i (64 bits: does not wrap).
  std::uint64_t m_firstBatchEntry = 1;
  // Released records the batch still names (one-shots that fired, timers destroyed while named by
  // it): End frees each once no entry left names it.
  std::vector<std::uint32_t> m_deferredFrees;
  std::size_t m_pendingOneShots = 0;  // one-shots scheduled: Begin reserves room to defer them
  bool m_dispatching = false;         // between a Begin that returned true and End
  bool m_hasLeftovers = false;        // End left undispatched entries: GetNextTimeout says 0
};

}  // namespace timerwheel::detail
