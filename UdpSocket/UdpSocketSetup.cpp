#include "UdpSocket/UdpSocketSetup.h"

#ifdef _WIN32
#include <mswsock.h>
#include <winsock2.h>
// Older MinGW-w64 headers lack them; the values are the SDK's (mstcpip.h / mswsock.h).
#ifndef SIO_UDP_CONNRESET
#define SIO_UDP_CONNRESET _WSAIOW(IOC_VENDOR, 12)
#endif
#ifndef SIO_UDP_NETRESET
#define SIO_UDP_NETRESET _WSAIOW(IOC_VENDOR, 15)
#endif
#else
#include <sys/socket.h>
#endif
#ifdef __linux__
#include <linux/sock_diag.h>
#endif

namespace timerwheel::udp {

IcmpReportsResult DisableIcmpErrorReports(boost::asio::ip::udp::socket& socket) {
#ifdef _WIN32
  struct Option {
    DWORD code;
    const char* name;
  };
  for (const Option option : {Option{SIO_UDP_CONNRESET, "SIO_UDP_CONNRESET"},
                              Option{SIO_UDP_NETRESET, "SIO_UDP_NETRESET"}}) {
    BOOL report = FALSE;
    DWORD bytesReturned = 0;
    if (::WSAIoctl(socket.native_handle(), option.code, &report, sizeof report, nullptr, 0,
                   &bytesReturned, nullptr, nullptr) == SOCKET_ERROR) {
      const int error = ::WSAGetLastError();
      // A stack without the option (Wine has no SIO_UDP_NETRESET) cannot report that error
      // either: nothing to turn off.
      if (error == WSAEOPNOTSUPP && option.code == SIO_UDP_NETRESET) continue;
      return {boost::system::error_code(error, boost::system::system_category()), option.name};
    }
  }
#else
  (void)socket;
#endif
  return {};
}

namespace {

#ifdef __linux__
// Whether the request was granted (Asio reports Linux's doubled figure halved).
bool GrantedInFull(int granted, int bytes) { return granted >= bytes; }

// Asks again with the privileged option (SO_RCVBUFFORCE, SO_SNDBUFFORCE); fails without
// CAP_NET_ADMIN, leaving the capped size.
void ForceBufferSize(boost::asio::ip::udp::socket& socket, int option, int bytes) {
  (void)::setsockopt(socket.native_handle(), SOL_SOCKET, option, &bytes, sizeof bytes);
}
#endif

}  // namespace

SocketBufferSizes SetSocketBufferSizes(boost::asio::ip::udp::socket& socket, int receiveBytes,
                                       int sendBytes) {
  using Socket = boost::asio::ip::udp::socket;
  boost::system::error_code ignored;  // the OS may cap these; it is not an error
  socket.set_option(Socket::receive_buffer_size(receiveBytes), ignored);
  socket.set_option(Socket::send_buffer_size(sendBytes), ignored);
  Socket::receive_buffer_size receive;
  Socket::send_buffer_size send;
  socket.get_option(receive, ignored);
  socket.get_option(send, ignored);
#ifdef __linux__
  if (!GrantedInFull(receive.value(), receiveBytes)) {
    ForceBufferSize(socket, SO_RCVBUFFORCE, receiveBytes);
    socket.get_option(receive, ignored);
  }
  if (!GrantedInFull(send.value(), sendBytes)) {
    ForceBufferSize(socket, SO_SNDBUFFORCE, sendBytes);
    socket.get_option(send, ignored);
  }
#endif
  return {receive.value(), send.value()};
}

std::uint64_t ReceiveBufferDrops(boost::asio::ip::udp::socket& socket) {
#ifdef __linux__
  std::uint32_t memory[SK_MEMINFO_VARS] = {};
  socklen_t size = sizeof memory;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_MEMINFO, memory, &size) != 0 ||
      size < sizeof(std::uint32_t) * (SK_MEMINFO_DROPS + 1)) {
    return 0;
  }
  return memory[SK_MEMINFO_DROPS];
#else
  (void)socket;
  return 0;
#endif
}

}  // namespace timerwheel::udp
