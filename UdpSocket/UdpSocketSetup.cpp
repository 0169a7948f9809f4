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

}  // namespace timerwheel::udp
