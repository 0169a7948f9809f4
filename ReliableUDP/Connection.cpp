// Connection: the thread-safe public face of a ConnectionCore (locking: LockedEngine.h).
#include "ReliableUDP/Connection.h"

#include <mutex>
#include <new>
#include <utility>

#include "ReliableUDP/Detail/ConnectionCore.h"
#include "ReliableUDP/EngineConversions.h"
#include "ReliableUDP/LockedEngine.h"

namespace timerwheel::rudp {
namespace {

// The engine completes with an EngineError; the application's handler takes an error_code. The
// adapter fits inline in the engine's Completion, so queuing an operation allocates nothing.
detail::Completion Adapt(Connection::Handler handler) {
  return [handler = std::move(handler)](detail::EngineError error) mutable {
    handler(detail::ToErrorCode(error));
  };
}

// What the end of a connection's last handle does, with the engine's lock held: receives
// abandoned (their buffers may die with the caller's handle), then a graceful close.
// Runs in ~Connection, which cannot throw: a completion that cannot be posted (no memory) stays
// queued, completed at the connection's end, and a close cut short goes on at its next event.
void EndWithoutHandle(detail::EndpointCore& core, detail::ConnectionCore& state) noexcept {
  try {
    state.AbandonReceives();
  } catch (const std::bad_alloc&) {  // the close below still ends the connection
  }
  if (core.IsShutDown()) return;
  try {
    state.Close(core.Now());
    core.AfterCall(state);
  } catch (const std::bad_alloc&) {
    return;
  }
}

// After an operation was queued: the engine handles what the connection reports. A completion
// it cannot post (no memory) stays with the connection, for its next event.
void AfterQueued(detail::EndpointCore& core, detail::ConnectionCore& state) {
  try {
    core.AfterCall(state);
  } catch (const std::bad_alloc&) {
  }
}

}  // namespace

std::shared_ptr<Connection> Connection::Make(const std::shared_ptr<detail::LockedEngine>& engine,
                                             const std::shared_ptr<detail::ConnectionCore>& state) {
  try {
    return std::make_shared<Connection>(engine, state);
  } catch (const std::bad_alloc&) {
    detail::LockedEngine::Call call(*engine);
    EndWithoutHandle(engine->Core(), *state);
    return nullptr;
  }
}

Connection::Connection(std::shared_ptr<detail::LockedEngine> engine,
                       std::shared_ptr<detail::ConnectionCore> state)
    : m_engine(std::move(engine)), m_state(std::move(state)) {}

Connection::~Connection() {
  detail::LockedEngine::Call call(*m_engine);
  EndWithoutHandle(m_engine->Core(), *m_state);
  // Released under the lock: the state's buffers go back to the endpoint's chunk pool.
  m_state.reset();
}

// The three operations below hold the adapted handler in a local declared before the call's
// lock: the engine takes it only once the operation is queued (or its completion posted), and if
// it throws first the handler is destroyed here, after the lock is released. It may hold the
// last reference to this Connection, whose destructor takes the lock (a std::mutex locked twice
// by one thread); or anything else. Once queued, what AfterCall meets (a completion it cannot
// post) waits for the connection's next event: the call does not throw then.

void Connection::AsyncSend(boost::asio::const_buffer message, Handler handler) {
  detail::Completion adapted = Adapt(std::move(handler));
  detail::LockedEngine::Call call(*m_engine);
  auto& core = m_engine->Core();
  m_state->Send(static_cast<const std::uint8_t*>(message.data()), message.size(), adapted,
                core.Now());
  AfterQueued(core, *m_state);
}

void Connection::AsyncReceive(std::vector<std::uint8_t>& message, Handler handler) {
  detail::Completion adapted = Adapt(std::move(handler));
  detail::LockedEngine::Call call(*m_engine);
  auto& core = m_engine->Core();
  m_state->Receive(message, adapted);
  AfterQueued(core, *m_state);
}

void Connection::AsyncWaitClosed(Handler handler) {
  detail::Completion adapted = Adapt(std::move(handler));
  detail::LockedEngine::Call call(*m_engine);
  m_state->WaitClosed(adapted);
}

void Connection::Close() {
  detail::LockedEngine::Call call(*m_engine);
  auto& core = m_engine->Core();
  if (core.IsShutDown()) return;
  m_state->Close(core.Now());
  core.AfterCall(*m_state);
}

void Connection::Abort() {
  detail::LockedEngine::Call call(*m_engine);
  auto& core = m_engine->Core();
  if (core.IsShutDown()) return;
  m_state->Abort(core.Now());
  core.AfterCall(*m_state);
}

ConnectionStatistics Connection::GetStatistics() const {
  detail::LockedEngine::Call call(*m_engine);
  return m_state->GetStatistics();
}

std::vector<std::uint8_t> Connection::ClientToken() const {
  detail::LockedEngine::Call call(*m_engine);
  return m_state->ClientToken();
}

boost::asio::ip::udp::endpoint Connection::RemoteEndpoint() const {
  detail::LockedEngine::Call call(*m_engine);
  return detail::ToUdpEndpoint(m_state->Remote());
}

}  // namespace timerwheel::rudp
