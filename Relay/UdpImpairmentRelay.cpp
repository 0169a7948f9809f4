// UdpImpairmentRelay: the impairment relay as a program (a developer tool: netem without the
// kernel). Runs until --duration elapses or SIGINT/SIGTERM, then prints what each direction did.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "Relay/ImpairmentRelay.h"
#include "Relay/OptionValues.h"

namespace {

using timerwheel::relay::ImpairmentProfile;
using timerwheel::relay::ImpairmentRelay;
using timerwheel::relay::LinkCounters;
using timerwheel::relay::Microseconds;
using timerwheel::relay::ParseMilliseconds;
using timerwheel::relay::ParseNumber;
using timerwheel::relay::ParsePort;
using timerwheel::relay::ParseProbability;
using timerwheel::relay::ParseRateMbit;
using timerwheel::relay::ParseUnsigned;
using timerwheel::relay::UsageError;
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
    "the plain one. P is a probability in [0, 1]; X (ms) is in [0, 1000000000] (11.6 days).\n"
    "  --loss P              Bernoulli loss\n"
    "  --burst-enter P       Gilbert-Elliott burst loss: P(good -> bad) per datagram; needs\n"
    "                        --burst-exit > 0 (else the first burst would never end)\n"
    "  --burst-exit P        P(bad -> good) per datagram (mean burst 1/P)\n"
    "  --burst-loss P        loss while bad (default 1)\n"
    "  --delay-ms X          base one-way delay\n"
    "  --jitter-ms X         uniform extra delay in [0, X]; FIFO unless --jitter-reorders\n"
    "  --jitter-reorders     let jitter reorder datagrams\n"
    "  --reorder P           hold a datagram back by the reorder delay\n"
    "  --reorder-delay-ms X  the reorder delay (default 2 x delay, or 5 ms without delay)\n"
    "  --duplicate P         deliver a datagram twice\n"
    "  --corrupt P           change one random byte\n"
    "  --rate-mbit R         link rate in Mbit/s, from 0.000001 (1 bit/s) to 1000000 (1 Tbit/s);\n"
    "                        0 or absent: unlimited\n"
    "  --queue-bytes N       drop-tail limit of the link's queue (default or 0: unlimited)\n"
    "Options take their value as the next argument or after '=' (--loss=0.1). Numbers are\n"
    "decimal: ports, N and --seed (0 to 18446744073709551615) are digits only, so 0100 is 100\n"
    "(not octal) and 0x10 is refused; --duration is in (0, 1000000000] seconds.\n";

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
  // The port as parsed (decimal), not as the resolver would read the text.
  const std::string service = std::to_string(ParsePort("--upstream", port));
  Udp::resolver resolver(io);
  boost::system::error_code error;
  const auto results = resolver.resolve(host, service, Udp::resolver::numeric_service, error);
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
         p.rateBitsPerSecond = ParseRateMbit(o, v);
       }},
      {"queue-bytes", true,
       [](ImpairmentProfile& p, const std::string& o, const std::string& v) {
         p.queueLimitBytes = static_cast<std::size_t>(ParseUnsigned(o, v, SIZE_MAX));
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
      const std::string text = value();
      const double seconds = ParseNumber(name, text);
      if (!(seconds > 0 && seconds <= 1e9)) {
        throw UsageError("--duration: " + text + " is out of range (0, 1000000000] seconds");
      }
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
  const struct {
    const ImpairmentProfile* profile;
    const char* direction;
    const char* prefix;
  } directions[] = {{&arguments.toUpstream, "client -> upstream", "--up-"},
                    {&arguments.toClient, "upstream -> client", "--down-"}};
  for (const auto& [profile, direction, prefix] : directions) {
    // Said in the options' words; Validate refuses the same.
    if (profile->burstEnter > 0 && profile->burstExit == 0) {
      throw UsageError(std::string("--burst-enter needs --burst-exit P in (0, 1] (or ") + prefix +
                       "burst-exit for " + direction +
                       "): with exit 0 the link would never leave the bad state");
    }
    if (const std::string problem = profile->Validate(); !problem.empty()) {
      throw UsageError(std::string(direction) + ": " + problem);
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
