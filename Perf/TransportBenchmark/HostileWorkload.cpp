// The hostile part of the transport benchmark: a server and a client engine on an in-memory link
// with a manual clock; the client's own datagrams can be cut off so that the benchmark speaks for
// it (same address, the server's connection ID), as an attacker with a script would. Each attack
// is an entry of Attacks(): a set-up, then a datagram to deliver over and over. Every attack of
// issue 14 over real sockets, beside a legitimate connection, is in HostileSocketWorkload.
#include "TransportBenchmark/HostileWorkload.h"

#include <algorithm>
#include <boost/asio/ip/udp.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <utility>

#include "ReliableUDP/Detail/EndpointCore.h"
#include "ReliableUDP/EngineConversions.h"
#include "TimerWheel/TimerWheel.h"
#include "TransportBenchmark/Measure.h"

namespace timerwheel::perf {
namespace {

namespace detail = rudp::detail;
using detail::AckRange;
using detail::Microseconds;
using detail::PacketNumber;
using detail::PacketWriter;
using Udp = boost::asio::ip::udp;
using Bytes = std::vector<std::uint8_t>;

class Link;

class Host final : public detail::IEndpointIo, public ITickProvider {
 public:
  Host(Link& link, unsigned short port, rudp::EndpointOptions options);
  ~Host() { core->Shutdown(); }
  void SendDatagram(const detail::Address& to, const std::uint8_t* data, std::size_t size) override;
  Microseconds Now() const override;
  void Post(detail::Completion& handler, detail::EngineError error) override;
  Ticks GetTickCount() const override { return Now() / 1000; }

  Link& link;
  Udp::endpoint address;
  std::unique_ptr<TimerWheel> wheel;
  std::unique_ptr<detail::EndpointCore> core;
};

struct Datagram {
  Udp::endpoint from, to;
  Bytes bytes;
};

class Link {
 public:
  Link() {
    rudp::EndpointOptions serverOptions;
    serverOptions.acceptIncoming = true;
    rudp::EndpointOptions clientOptions;
    clientOptions.maxAckDelay = 999;  // the attacker's: lost records are kept 3 PTOs (3 s)
    server = std::make_unique<Host>(*this, 9000, serverOptions);
    client = std::make_unique<Host>(*this, 9001, clientOptions);
    server->core->Accept([this](detail::EngineError, std::shared_ptr<detail::ConnectionCore> c) {
      serverSide = std::move(c);
    });
    client->core->Connect(detail::ToAddress(server->address),
                          [this](detail::EngineError, std::shared_ptr<detail::ConnectionCore> c) {
                            clientSide = std::move(c);
                          });
    for (int i = 0; i < 1000 && !(serverSide && clientSide); ++i) Step();
  }

  // 1 ms passes: every datagram in flight arrives (in order), handlers run, timers fire.
  void Step() {
    now += 1000;
    std::vector<Datagram> due;
    due.swap(inFlight);
    for (const Datagram& datagram : due) {
      if (datagram.to == server->address) {
        if (!hijacked)
          server->core->OnDatagram(detail::ToAddress(datagram.from), datagram.bytes.data(),
                                   datagram.bytes.size());
      } else {
        client->core->OnDatagram(detail::ToAddress(datagram.from), datagram.bytes.data(),
                                 datagram.bytes.size());
      }
    }
    RunPosted();
    server->wheel->HandleTimeouts();
    client->wheel->HandleTimeouts();
    RunPosted();
  }
  void RunPosted() {
    for (std::size_t i = 0; i < posted.size(); ++i) {
      auto handler = std::move(posted[i].first);
      handler(posted[i].second);
    }
    posted.clear();
  }
  void Queue(const Udp::endpoint& from, const Udp::endpoint& to, const std::uint8_t* data,
             std::size_t size) {
    if (from == server->address) {
      detail::DecodedPacket packet;
      if (detail::DecodePacket(data, size, packet) == detail::DecodeStatus::Ok) {
        if (packet.header.type == detail::PacketType::Data) {
          serverSent.insert(packet.header.packetNumber);
        }
      }
    } else if (from == client->address) {
      detail::DecodedPacket packet;
      if (detail::DecodePacket(data, size, packet) == detail::DecodeStatus::Ok) {
        if (packet.header.type == detail::PacketType::Data) {
          serverId = packet.header.destination;
          clientLargest = std::max(clientLargest, packet.header.packetNumber);
        }
        if (packet.header.type == detail::PacketType::HelloWithCookie) {
          helloWithCookie.assign(data, data + size);
        }
      }
    }
    inFlight.push_back(Datagram{from, to, Bytes(data, data + size)});
  }

  // The server sends `count` messages of `size` bytes (the client discards them).
  void ServerSends(std::size_t count, std::size_t size) {
    static const Bytes payload(64 * 1024, 0x5A);
    clientSide->AbandonReceives();
    for (std::size_t i = 0; i < count; ++i) {
      serverSide->Send(
          payload.data(), std::min(size, payload.size()), [](detail::EngineError) {}, now);
    }
    server->core->AfterCall(*serverSide);
  }
  void Hijack() {
    hijacked = true;
    nextPacketNumber = clientLargest + 1;
  }
  Bytes Packet(const std::function<void(PacketWriter&)>& frames, std::size_t capacity = 1200) {
    Bytes datagram(capacity);
    PacketWriter writer(datagram.data(), datagram.size());
    writer.BeginData(serverId, nextPacketNumber++);
    frames(writer);
    datagram.resize(writer.Finish());
    return datagram;
  }
  // The newest runs of numbers the server sent in [from, to], as ACK ranges.
  std::vector<AckRange> SentRanges(PacketNumber from, PacketNumber to) const {
    std::vector<AckRange> ranges;
    auto it = serverSent.upper_bound(to);
    while (it != serverSent.begin() && ranges.size() < detail::kMaxAckRanges) {
      --it;
      if (*it < from) break;
      if (!ranges.empty() && ranges.back().smallest == *it + 1) {
        ranges.back().smallest = *it;
      } else {
        ranges.push_back(AckRange{*it, *it});
      }
    }
    return ranges;
  }
  Bytes AckPacket(const std::vector<AckRange>& ranges) {
    return Packet([&](PacketWriter& w) { w.AppendAck(ranges.data(), ranges.size(), 0); });
  }
  void DeliverToServer(const Bytes& datagram) {
    server->core->OnDatagram(detail::ToAddress(client->address), datagram.data(), datagram.size());
  }

  Microseconds now = 1'000'000'000;
  std::vector<Datagram> inFlight;
  std::vector<std::pair<detail::Completion, detail::EngineError>> posted;
  std::unique_ptr<Host> server, client;
  std::shared_ptr<detail::ConnectionCore> serverSide, clientSide;
  bool hijacked = false;
  detail::ConnectionId serverId = 0;
  PacketNumber clientLargest = 0, nextPacketNumber = 0;
  std::set<PacketNumber> serverSent;
  Bytes helloWithCookie;
};

Host::Host(Link& link_, unsigned short port, rudp::EndpointOptions options)
    : link(link_), address(boost::asio::ip::make_address_v4("10.0.0.1"), port) {
  TimerWheelOptions wheelOptions;
  wheelOptions.granularity = 1;
  wheel = std::make_unique<TimerWheel>(wheelOptions, *this);
  core = std::make_unique<detail::EndpointCore>(*this, *wheel, 1, rudp::ValidateOptions(options));
}
void Host::SendDatagram(const detail::Address& to, const std::uint8_t* data, std::size_t size) {
  link.Queue(address, detail::ToUdpEndpoint(to), data, size);
}
Microseconds Host::Now() const { return link.now; }
void Host::Post(detail::Completion& handler, detail::EngineError error) {
  // emplace_back allocates before it moves the handler: a failed post leaves it (the contract).
  link.posted.emplace_back(std::move(handler), error);
}

// An attack: its name, the bound that holds it, and a set-up on a connected link that returns
// what makes each attack datagram (all are made before the timing starts).
struct Attack {
  const char* name;
  const char* bound;
  std::function<std::function<Bytes()>(Link&)> prepare;
  // At most this many are timed (0: as many as asked): e.g. protocol violations end the
  // connection after 100, and what follows costs a lookup only.
  std::size_t limit = 0;
};

const std::vector<Attack>& Attacks() {
  static const std::vector<Attack> attacks{
      {"repeated ACK ranges, ~2,000 records held",
       "O(ranges x log records) visits per frame (item 1)",
       [](Link& link) {
         link.ServerSends(64, 64 * 1024);
         link.Step();
         link.Hijack();
         const PacketNumber held = *link.serverSent.rbegin();  // never acknowledged
         for (int i = 0; i < 2500; ++i) {                      // under the 3 PTOs that keep it
           link.Step();
           const auto ranges = link.SentRanges(held + 1, *link.serverSent.rbegin());
           if (!ranges.empty()) link.DeliverToServer(link.AckPacket(ranges));
         }
         const auto ranges = link.SentRanges(held + 1, *link.serverSent.rbegin());
         return [&link, ranges] { return link.AckPacket(ranges); };  // each a new packet
       }},
      {"50 ACK frames in one packet", "one ACK frame per packet (item 1)",
       [](Link& link) {
         link.ServerSends(10, 1000);
         for (int i = 0; i < 20; ++i) link.Step();
         link.Hijack();
         const auto ranges = link.SentRanges(0, *link.serverSent.rbegin());
         return [&link, ranges] {
           return link.Packet([&](PacketWriter& w) {
             for (int i = 0; i < 50; ++i) w.AppendAck(ranges.data(), ranges.size(), 0);
           });
         };
       },
       100},
      {"64 KB datagram", "dropped before parsing (item 1)",
       [](Link&) { return [] { return Bytes(65'000, 0x14); }; }},
      {"replayed PING", "one ACK per RTT, <= 3x bytes (item 6)",
       [](Link& link) {
         link.Hijack();
         Bytes ping = link.Packet([](PacketWriter& w) { w.AppendPing(); });
         link.DeliverToServer(ping);
         return [ping] { return ping; };  // the same packet again
       }},
      {"forged HelloWithCookie, live connection", "cookie verified every time (item 8)",
       [](Link& link) {
         detail::DecodedPacket genuine;
         detail::DecodePacket(link.helloWithCookie.data(), link.helloWithCookie.size(), genuine);
         auto cookie = genuine.header.cookie;
         cookie[0] ^= 0x5A;
         Bytes forged(detail::kHelloSize);
         PacketWriter writer(forged.data(), forged.size());
         writer.BeginHelloWithCookie(genuine.header.source, cookie, genuine.header.parameters);
         forged.resize(writer.Finish());
         return [forged] { return forged; };
       }},
  };
  return attacks;
}

// What reading the thread CPU clock costs, in ns: subtracted once per timed batch.
double ClockOverheadNs() {
  constexpr int kReadings = 10'000;
  const double before = ThreadCpuSeconds(pthread_self());
  for (int i = 0; i < kReadings; ++i) ThreadCpuSeconds(pthread_self());
  return (ThreadCpuSeconds(pthread_self()) - before) * 1e9 / kReadings;
}

// Server thread CPU, in ns per datagram, of delivering each of `datagrams`.
double TimeDeliveries(Link& link, const std::vector<Bytes>& datagrams, double overheadNs) {
  link.inFlight.reserve(link.inFlight.size() + datagrams.size());  // replies: no growth timed
  const double before = ThreadCpuSeconds(pthread_self());
  for (const Bytes& datagram : datagrams) link.DeliverToServer(datagram);
  const double seconds = ThreadCpuSeconds(pthread_self()) - before;
  link.inFlight.clear();  // the server's replies go nowhere
  link.RunPosted();
  return (seconds * 1e9 - overheadNs) / static_cast<double>(datagrams.size());
}

std::uint64_t Visits(const Link& link) {
  return link.serverSide ? link.serverSide->GetStatistics().ackRecordsVisited : 0;
}

}  // namespace

std::vector<HostileRow> RunHostileWorkload(std::size_t datagrams) {
  std::vector<HostileRow> rows;
  const double overhead = ClockOverheadNs();
  {
    // The baseline: the client's packets of a stream of 1,000-byte messages (data, with ACKs),
    // timed as the server handles them as they arrive.
    const Bytes message(1000, 0x21);
    Link fresh;
    fresh.serverSide->AbandonReceives();
    fresh.clientSide->AbandonReceives();
    std::size_t sent = 0;
    const std::uint64_t visits = Visits(fresh);
    double seconds = 0;
    std::size_t bytes = 0;
    std::size_t batches = 0;
    while (sent < datagrams) {
      // A burst of messages; the client's datagrams of it reach the server as one timed batch.
      for (int i = 0; i < 32; ++i) {
        fresh.clientSide->Send(
            message.data(), message.size(), [](detail::EngineError) {}, fresh.now);
      }
      fresh.client->core->AfterCall(*fresh.clientSide);
      std::vector<Datagram> due, toServer;
      due.swap(fresh.inFlight);
      for (Datagram& d : due) {
        (d.to == fresh.server->address ? toServer : fresh.inFlight).push_back(std::move(d));
      }
      fresh.inFlight.reserve(fresh.inFlight.size() + 4 * toServer.size());
      const double before = ThreadCpuSeconds(pthread_self());
      for (const Datagram& d : toServer) {
        fresh.server->core->OnDatagram(detail::ToAddress(d.from), d.bytes.data(), d.bytes.size());
      }
      seconds += ThreadCpuSeconds(pthread_self()) - before;
      ++batches;
      sent += toServer.size();
      for (const Datagram& d : toServer) bytes += d.bytes.size();
      for (int i = 0; i < 5; ++i) fresh.Step();
    }
    HostileRow row;
    row.attack = "normal data datagram (baseline)";
    row.bound = "-";
    row.datagrams = sent;
    row.bytes = bytes;
    row.nsPerDatagram =
        (seconds * 1e9 - overhead * static_cast<double>(batches)) / static_cast<double>(sent);
    row.ratio = 1;
    row.visitsPerDatagram =
        static_cast<double>(Visits(fresh) - visits) / static_cast<double>(row.datagrams);
    rows.push_back(row);
  }
  for (const Attack& attack : Attacks()) {
    Link link;
    const auto make = attack.prepare(link);
    HostileRow row;
    row.attack = attack.name;
    row.bound = attack.bound;
    row.datagrams = attack.limit != 0 ? std::min(datagrams, attack.limit) : datagrams;
    std::vector<Bytes> attackDatagrams;
    for (std::size_t i = 0; i < row.datagrams; ++i) attackDatagrams.push_back(make());
    row.bytes = attackDatagrams.front().size();
    const std::uint64_t visits = Visits(link);
    row.nsPerDatagram = TimeDeliveries(link, attackDatagrams, overhead);
    row.visitsPerDatagram =
        static_cast<double>(Visits(link) - visits) / static_cast<double>(row.datagrams);
    row.ratio = row.nsPerDatagram / rows.front().nsPerDatagram;
    rows.push_back(row);
  }
  return rows;
}

void RunHostileTable(const Settings& settings) {
  const std::size_t datagrams = settings.latencySeconds < 2 ? 200 : 2000;
  const auto rows = RunHostileWorkload(datagrams);
  std::printf("\n## Hostile peer: server CPU per attack datagram (sans-I/O engine)\n\n");
  std::printf(
      "| Datagram | Bytes | Timed | Server CPU (ns) | x normal | ACK records visited | "
      "Bound |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
  const std::string csvPath = settings.results + "/hostile.csv";
  std::FILE* csv = std::fopen(csvPath.c_str(), "w");
  if (csv != nullptr) std::fprintf(csv, "attack,bytes,ns_per_datagram,ratio\n");
  for (const HostileRow& row : rows) {
    const std::size_t bytes =
        row.attack.rfind("normal", 0) == 0 ? row.bytes / row.datagrams : row.bytes;
    std::printf("| %s | %zu | %zu | %.0f | %.2f | %.1f | %s |\n", row.attack.c_str(), bytes,
                row.datagrams, row.nsPerDatagram, row.ratio, row.visitsPerDatagram,
                row.bound.c_str());
    if (csv != nullptr) {
      std::fprintf(csv, "\"%s\",%zu,%.0f,%.3f\n", row.attack.c_str(), bytes, row.nsPerDatagram,
                   row.ratio);
    }
  }
  if (csv != nullptr) std::fclose(csv);
  std::fflush(stdout);
}

}  // namespace timerwheel::perf
