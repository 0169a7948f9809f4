// AdmissionControl: per-address and per-prefix connection counts and a new-connection rate.
#include "ReliableUDP/Detail/AdmissionControl.h"

#include <algorithm>
#include <cstring>

namespace timerwheel::rudp::detail {

AdmissionControl::AdmissionControl(const EndpointOptions& options)
    : m_maxConnections(options.maxConnections),
      m_perAddress(options.maxConnectionsPerAddress),
      m_perPrefix(options.maxConnectionsPerPrefix),
      m_rate(options.newConnectionsPerSecond),
      m_byAddress(MakePeerKeyedMap<Key, std::size_t>()),
      m_byPrefix(MakePeerKeyedMap<Key, std::size_t>()) {}

AdmissionControl::Key AdmissionControl::AddressKey(const Address& address) noexcept {
  Key key;
  key.bytes[0] = static_cast<std::uint8_t>(address.family);
  std::memcpy(key.bytes.data() + 1, address.bytes.data(), address.ByteCount());
  return key;
}

AdmissionControl::Key AdmissionControl::PrefixKey(const Address& address) noexcept {
  Key key;
  key.bytes[0] = static_cast<std::uint8_t>(address.family);
  std::memcpy(key.bytes.data() + 1, address.bytes.data(), address.PrefixByteCount());
  return key;
}

bool AdmissionControl::MayAdmit(const Address& from, Microseconds now) {
  if (!m_rate.Available(now)) return false;
  if (m_perAddress != 0) {
    const auto found = m_byAddress.find(AddressKey(from));
    if (found != m_byAddress.end() && found->second >= m_perAddress) return false;
  }
  if (m_perPrefix != 0) {
    const auto found = m_byPrefix.find(PrefixKey(from));
    if (found != m_byPrefix.end() && found->second >= m_perPrefix) return false;
  }
  return true;
}

void AdmissionControl::OnAdmitted(const Address& from, Microseconds now) {
  // Both counts or neither: a count left behind by a failed allocation would hold a place of
  // its address for ever.
  const Key address = AddressKey(from);
  ++m_byAddress[address];
  try {
    ++m_byPrefix[PrefixKey(from)];
  } catch (...) {
    Decrement(m_byAddress, address);
    throw;
  }
  m_rate.TryTake(now);
}

void AdmissionControl::OnEnded(const Address& from) {
  Decrement(m_byAddress, AddressKey(from));
  Decrement(m_byPrefix, PrefixKey(from));
}

void AdmissionControl::Decrement(Counts& counts, const Key& key) {
  const auto found = counts.find(key);
  if (found == counts.end()) return;
  if (--found->second == 0) counts.erase(found);
  ShrinkMapIfSparse(counts);  // after a burst
}

}  // namespace timerwheel::rudp::detail
