// Connection: the thread-safe public face of a ConnectionState.
#include "ReliableUDP/Connection.h"

#include <mutex>
#include <utility>

#include "ReliableUDP/Detail/ConnectionState.h"
#include "ReliableUDP/Detail/EndpointCore.h"

namespace timerwheel::rudp {

Connection::Connection(std::shared_ptr<detail::EndpointCore> core,
                       std::shared_ptr<detail::ConnectionState> state)
    : m_core(std::move(core)), m_state(std::move(state)) {}

Connection::~Connection() {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  m_state->AbandonReceives();  // their buffers may die with the caller's last handle
  if (!m_core->IsShutDownLocked()) {
    m_state->Close(m_core->Now());
    m_core->AfterCallLocked(*m_state);
  }
  // Released under the lock: the state's buffers go back to the endpoint's chunk pool.
  m_state.reset();
}

void Connection::AsyncSend(boost::asio::const_buffer message, Handler handler) {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  m_state->Send(static_cast<const std::uint8_t*>(message.data()), message.size(),
                std::move(handler), m_core->Now());
  m_core->AfterCallLocked(*m_state);
}

void Connection::AsyncReceive(std::vector<std::uint8_t>& message, Handler handler) {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  m_state->Receive(message, std::move(handler), m_core->Now());
  m_core->AfterCallLocked(*m_state);
}

void Connection::AsyncWaitClosed(Handler handler) {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  m_state->WaitClosed(std::move(handler));
}

void Connection::Close() {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  if (m_core->IsShutDownLocked()) return;
  m_state->Close(m_core->Now());
  m_core->AfterCallLocked(*m_state);
}

void Connection::Abort() {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  if (m_core->IsShutDownLocked()) return;
  m_state->Abort(m_core->Now());
  m_core->AfterCallLocked(*m_state);
}

ConnectionStatistics Connection::GetStatistics() const {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  return m_state->GetStatistics();
}

boost::asio::ip::udp::endpoint Connection::RemoteEndpoint() const {
  std::lock_guard<std::mutex> lock(m_core->Mutex());
  return m_state->Remote();
}

}  // namespace timerwheel::rudp
