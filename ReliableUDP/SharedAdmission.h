// The admission limits of an endpoint whose connections are split over shards
// (EndpointOptions::shards): one AdmissionControl behind a mutex, so that the limits per address,
// per prefix, the new-connection rate and the connection limit hold for the endpoint as a whole.
#pragma once

#include <mutex>

#include "ReliableUDP/Detail/AdmissionControl.h"

namespace timerwheel::rudp::detail {

// Locking: m_mutex guards the AdmissionControl. The shards call in under their own mutex (lock
// order: a shard's, then this), only when a connection opens or ends. A shard asks
// (MayAdmit) and later admits (OnAdmitted) under its own lock: two shards may both pass for the
// same last place, so a limit can be passed by at most shards - 1 connections.
class SharedAdmission final : public IAdmission {
 public:
  explicit SharedAdmission(const EndpointOptions& options) : m_admission(options) {}

  bool MayAdmit(const Address& from, Microseconds now) override {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_admission.MayAdmit(from, now);
  }
  void OnAdmitted(const Address& from, Microseconds now) override {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_admission.OnAdmitted(from, now);
  }
  void OnEnded(const Address& from) override {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_admission.OnEnded(from);
  }
  bool UnderConnectionLimit() const override {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_admission.UnderConnectionLimit();
  }
  void OnOpened() override {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_admission.OnOpened();
  }
  void OnClosed() override {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_admission.OnClosed();
  }
  std::size_t TrackedAddresses() const override {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_admission.TrackedAddresses();
  }
  std::size_t TrackedPrefixes() const override {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_admission.TrackedPrefixes();
  }

 private:
  mutable std::mutex m_mutex;
  AdmissionControl m_admission;
};

}  // namespace timerwheel::rudp::detail
