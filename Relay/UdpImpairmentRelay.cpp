// UdpImpairmentRelay: the impairment relay as a program (a developer tool: netem without the
// kernel). Runs until --duration elapses or SIGINT/SIGTERM, then prints what each direction did.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "Relay/ImpairmentRelay.h"

namespace {

using timerwheel::relay::ImpairmentProfile;
using timerwheel::relay::ImpairmentRelay;
using timerwheel::relay::LinkCounters;
using timerwheel::relay::Microseconds;
using Udp = boost::asio::ip::udp;

constexpr const char* kUsage =
    "usage: UdpImpairmentRelay --listen <port | address:port> --upstream <host:port>\n"
    "                          [--seed N] [--duration SECONDS] [direction options]\n"
    "\n"
    "Relays UDP datagrams between clients and one upstream server, impairing each direction.\n"
    "Runs until --duration elapses or SIGINT/SIGTERM, then prints the counters.\n"
    "\n"
    "Direction options apply to both directions, or to one with the prefix --up- (client to\n"
    "upstream) or --down- (upstream to client), e.g. --up-loss 0.1; a prefixed option wins over\n"
    "the plain one. P is a probability in [0, 1].\n"
    "  --loss P              Bernoulli loss\n"
    "  --burst-enter P       Gilbert-Elliott burst loss: P(good -> bad) per datagram\n"
    "  --burst-exit P        P(bad -> good) per datagram (mean burst 1/P)\n"
    "  --burst-loss P        loss while bad (default 1)\n"
    "  --delay-ms X          base one-way delay\n"
    "  --jitter-ms X         uniform extra delay in [0, X]; FIFO unless --jitter-reorders\n"
    "  --jitter-reorders     let jitter reorder datagrams\n"
    "  --reorder P           hold a datagram back by the reorder delay\n"
    "  --reorder-delay-ms X  the reorder delay (default 2 x delay, or 5 ms without delay)\n"
    "  --duplicate P         deliver a datagram twice\n"
    "  --corrupt P           change one random byte\n"
    "  --rate-mbit X         link rate in Mbit/s (default unlimited)\n"
    "  --queue-bytes N       drop-tail limit of the link's queue (default unlimited)\n"
    "Options take their value as the next argument or after '=' (--loss=0.1).\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

double ParseNumber(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
    throw UsageError(option + ": '" + text + "' is not a number");
  }
  return value;
}

std::uint64_t ParseUnsigned(const std::string& option, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || text[0] == '-' || text[0] == '+' || end != text.c_str() + text.size() ||
      errno == ERANGE) {
    throw UsageError(option + ": '" + text + "' is not a non-negative integer");
  }
  return value;
}

double ParseProbability(const std::string& option, const std::string& text) {
  const double value = ParseNumber(option, text);
  if (value < 0 || value > 1) throw UsageError(option + ": " + text + " is not in [0, 1]");
  return value;
}

double ParseNonNegative(const std::string& option, const std::string& text, double maximum) {
  const double value = ParseNumber(option, text);
  if (value < 0 || value > maximum) {
    throw UsageError(option + ": " + text + " is out of range [0, " +
                     std::to_string(static_cast<long long>(maximum)) + "]");
  }
  return value;
}

Microseconds ParseMilliseconds(const std::string& option, const std::string& text) {
  // At most 1e9 ms (11.6 days): far beyond any use, far below overflow.
  return static_cast<Microseconds>(std::llround(ParseNonNegative(option, text, 1e9) * 1000));
}

// "host:port" or "[v6 address]:port".
std::pair<std::string, std::string> SplitHostPort(const std::string& option,
                                                  const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw UsageError(option + ": '" + text + "' is not host:port");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, text.substr(colon + 1)};
}

unsigned short ParsePort(const std::string& option, const std::string& text) {
  const std::uint64_t port = ParseUnsigned(option, text);
  if (port > 65535) throw UsageError(option + ": port " + text + " is out of range");
  return static_cast<unsigned short>(port);
}

Udp::endpoint ParseListen(const std::string& text) {
  if (text.find(':') == std::string::npos) {
    return Udp::endpoint(Udp::v4(), ParsePort("--listen", text));
  }
  const auto [host, port] = SplitHostPort("--listen", text);
  boost::system::error_code error;
  const auto address = boost::asio::ip::make_address(host, error);
  if (error) throw UsageError("--listen: '" + host + "' is not an IP address");
  return Udp::endpoint(address, ParsePort("--listen", port));
}

Udp::endpoint ResolveUpstream(boost::asio::io_context& io, const std::string& text) {
  const auto [host, port] = SplitHostPort("--upstream", text);
  ParsePort("--upstream", port);
  Udp::resolver resolver(io);
  boost::system::error_code error;
  const auto results = resolver.resolve(host, port, error);
  if (error || results.empty()) {
    throw UsageError("--upstream: cannot resolve '" + host + "': " + error.message());
  }
  return results.begin()->endpoint();
}

using Setter =
    std::function<void(ImpairmentProfile&, const std::string& option, const std::string& value)>;

struct DirectionOption {
  const char* name;
  bool takesValue;
  Setter set;
};

const std::vector<DirectionOption>& DirectionOptions() {
  static const std::vector<DirectionOption> options = {
      {"loss", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.loss = ParseProbability(o, v);
       }},
      {"burst-enter", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.burstEnter = ParseProbability(o, v);
       }},
      {"burst-exit", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.burstExit = ParseProbability(o, v);
       }},
      {"burst-loss", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.burstLoss = ParseProbability(o, v);
       }},
      {"delay-ms", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.delay = ParseMilliseconds(o, v);
       }},
      {"jitter-ms", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.jitter = ParseMilliseconds(o, v);
       }},
      {"jitter-reorders", false,
       [](ImpairmentProfile& p, const std::string&, const std::string&) {
         p.jitterReorders = true;
       }},
      {"reorder", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.reorder = ParseProbability(o, v);
       }},
      {"reorder-delay-ms", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.reorderDelay = ParseMilliseconds(o, v);
       }},
      {"duplicate", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.duplicate = ParseProbability(o, v);
       }},
      {"corrupt", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.corrupt = ParseProbability(o, v);
       }},
      {"rate-mbit", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.rateBitsPerSecond = ParseNonNegative(o, v, 1e6) * 1e6;  // up to 1 Tbit/s
       }},
      {"queue-bytes", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.queueLimitBytes = static_cast<std::size_t>(ParseUnsigned(o, v));
       }},
  };
  return options;
}

struct Arguments {
  Udp::endpoint listen;
  std::string upstream;
  std::uint64_t seed = 1;
  std::optional<double> durationSeconds;
  ImpairmentProfile toUpstream;
  ImpairmentProfile toClient;
};

Arguments Parse(int argc, char** argv) {
  enum Scope { kBoth, kUp, kDown };
  struct Assignment {
    Scope scope;
    const DirectionOption* option;
    std::string name;
    std::string value;
  };
  std::vector<Assignment> assignments;
  Arguments arguments;
  bool haveListen = false;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    std::optional<std::string> inlineValue;
    if (name.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + name + "'");
    if (const auto equals = name.find('='); equals != std::string::npos) {
      inlineValue = name.substr(equals + 1);
      name.resize(equals);
    }
    const auto value = [&]() -> std::string {
      if (inlineValue) return *inlineValue;
      if (i + 1 >= argc) throw UsageError(name + " needs a value");
      return argv[++i];
    };
    if (name == "--listen") {
      arguments.listen = ParseListen(value());
      haveListen = true;
    } else if (name == "--upstream") {
      arguments.upstream = value();
    } else if (name == "--seed") {
      arguments.seed = ParseUnsigned(name, value());
    } else if (name == "--duration") {
      const double seconds = ParseNonNegative(name, value(), 1e9);
      if (seconds <= 0) throw UsageError("--duration must be > 0");
      arguments.durationSeconds = seconds;
    } else {
      Scope scope = kBoth;
      std::string bare = name.substr(2);
      if (bare.rfind("up-", 0) == 0) {
        scope = kUp;
        bare = bare.substr(3);
      } else if (bare.rfind("down-", 0) == 0) {
        scope = kDown;
        bare = bare.substr(5);
      }
      const DirectionOption* found = nullptr;
      for (const auto& option : DirectionOptions()) {
        if (bare == option.name) found = &option;
      }
      if (found == nullptr) throw UsageError("unknown option " + name);
      std::string text;
      if (found->takesValue) {
        text = value();
      } else if (inlineValue) {
        throw UsageError(name + " takes no value");
      }
      assignments.push_back({scope, found, name, text});
    }
  }
  if (!haveListen) throw UsageError("--listen is required");
  if (arguments.upstream.empty()) throw UsageError("--upstream is required");
  // Plain options first, so that --up-/--down- ones win whatever their order.
  for (const Scope pass : {kBoth, kUp, kDown}) {
    for (const auto& assignment : assignments) {
      if (assignment.scope != pass) continue;
      if (pass != kDown)
        assignment.option->set(arguments.toUpstream, assignment.name, assignment.value);
      if (pass != kUp)
        assignment.option->set(arguments.toClient, assignment.name, assignment.value);
    }
  }
  for (const auto* profile : {&arguments.toUpstream, &arguments.toClient}) {
    if (const std::string problem = profile->Validate(); !problem.empty()) {
      throw UsageError(problem);
    }
  }
  return arguments;
}

std::string ToString(const Udp::endpoint& endpoint) {
  const std::string address = endpoint.address().to_string();
  const std::string port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + address + "]:" + port : address + ":" + port;
}

void PrintCounters(const char* label, const LinkCounters& c) {
  std::printf("%s: in %" PRIu64 ", out %" PRIu64 "; dropped: loss %" PRIu64 ", burst %" PRIu64
              ", queue %" PRIu64 "; duplicated %" PRIu64 ", reordered %" PRIu64
              ", corrupted %" PRIu64 "; bytes in %" PRIu64 ", out %" PRIu64
              "; errors: receive %" PRIu64 ", send %" PRIu64 "\n",
              label, c.in, c.out, c.droppedLoss, c.droppedBurst, c.droppedQueue, c.duplicated,
              c.reordered, c.corrupted, c.bytesIn, c.bytesOut, c.receiveErrors, c.sendErrors);
}

int Run(const Arguments& arguments, boost::asio::io_context& io, const Udp::endpoint& upstream) {
  ImpairmentRelay relay(io, arguments.listen, upstream, arguments.toUpstream, arguments.toClient,
                        arguments.seed);
  std::printf("UdpImpairmentRelay: listening on %s, upstream %s, seed %" PRIu64 "\n",
              ToString(relay.LocalEndpoint()).c_str(), ToString(upstream).c_str(), arguments.seed);
  std::printf("up   (client -> upstream): %s\n", arguments.toUpstream.Describe().c_str());
  std::printf("down (upstream -> client): %s\n", arguments.toClient.Describe().c_str());
  std::fflush(stdout);

  const auto start = std::chrono::steady_clock::now();
  std::string reason;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  boost::asio::steady_timer deadline(io);
  const auto stop = [&](const std::string& why) {
    if (!reason.empty()) return;
    reason = why;
    relay.Close();
    signals.cancel();
    deadline.cancel();
  };
  signals.async_wait([&](const boost::system::error_code& error, int signal) {
    if (!error) stop(signal == SIGINT ? "SIGINT" : "SIGTERM");
  });
  if (arguments.durationSeconds) {
    deadline.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(*arguments.durationSeconds)));
    deadline.async_wait([&](const boost::system::error_code& error) {
      if (!error) stop("duration elapsed");
    });
  }
  io.run();

  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("stopped (%s) after %.3f s; %zu client(s)\n", reason.c_str(), elapsed,
              relay.ClientCount());
  PrintCounters("up  ", relay.ToUpstreamCounters());
  PrintCounters("down", relay.ToClientCounters());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--help" || argument == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  try {
    const Arguments arguments = Parse(argc, argv);
    boost::asio::io_context io;
    const Udp::endpoint upstream = ResolveUpstream(io, arguments.upstream);
    return Run(arguments, io, upstream);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "UdpImpairmentRelay: %s (--help lists the options)\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "UdpImpairmentRelay: %s\n", error.what());
    return 1;
  }
}
