// ImpairmentProfile: what the impairment relay does to one direction of traffic, and the
// counters it keeps per direction.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace timerwheel::relay {

using Microseconds = std::uint64_t;

// Bounds on a profile's times (Validate), and where the model's times stop.
//
// The relay counts microseconds from its start and adds them to a steady_clock time point:
// int64 nanoseconds, whose range ends 2^63 ns = 9.22e15 us (292 years) after the clock's epoch
// (usually the boot). A datagram's delivery time is its arrival, plus its wait behind the link's
// backlog, plus its own terms:
//  - its transmission: at kMinRateBitsPerSecond (1 bit/s) a 65,536-byte datagram, the largest
//    the relay reads, takes 524,288 s = 5.2e11 us (the old floor, any rate > 0, let
//    --rate-mbit 1e-12 make a 1,200-byte datagram 9.6e15 us: past the clock's end);
//  - delay, jitter and reorder delay, each at most kMaxDelay = 1e12 us (1e9 ms, 11.6 days: the
//    cap UdpImpairmentRelay always had; far beyond any path, and 2 x delay cannot wrap).
// Those add at most 5.2e11 + 1e12 + 1e12 + 2e12 (the implied reorder delay, 2 x delay) = 4.5e12
// us to an arrival within the relay's longest run (UdpImpairmentRelay's --duration is at most 1e9
// s = 1e15 us): 1.005e15 us, a ninth of the clock's range. No upper bound on the rate is needed:
// a faster link only makes the times shorter.
//
// The backlog wait is what the traffic makes it (without queueLimitBytes it has no bound), and
// LinkModel takes profiles it has not validated, so the model also saturates every time it
// computes at kLatestTime = 2^52 us (142.7 years; exact as a double, and 4.5e18 ns past the
// clock's epoch, which leaves the epoch 149 years of room): a datagram due then is never sent, as
// on a link that never drains. The relay's deadline conversion is checked as well.
constexpr Microseconds kMaxDelay = 1'000'000'000'000;
constexpr double kMinRateBitsPerSecond = 1;
constexpr Microseconds kLatestTime = Microseconds{1} << 52;

// One direction of a link. Every probability is per datagram, in [0, 1]; the default profile
// passes every datagram through at once, unchanged.
//
// The stages, in order (see Detail/LinkModel.h): loss (Gilbert-Elliott burst, then Bernoulli),
// the rate-limited link with its drop-tail queue, corruption, duplication, then per copy the base
// delay, jitter and reordering.
struct ImpairmentProfile {
  double loss = 0;  // Bernoulli loss

  // Gilbert-Elliott burst loss, off while burstEnter is 0. Before each datagram the state moves
  // good -> bad with burstEnter, bad -> good with burstExit; a datagram that finds the link bad is
  // lost with burstLoss. With burstLoss 1: mean burst 1 / burstExit datagrams, overall loss
  // burstEnter / (burstEnter + burstExit). burstEnter > 0 needs burstExit > 0 (Validate): with
  // burstExit 0 the first move to bad would be for ever.
  double burstEnter = 0;
  double burstExit = 0;
  double burstLoss = 1;

  Microseconds delay = 0;   // base one-way delay, at most kMaxDelay
  Microseconds jitter = 0;  // uniform extra delay in [0, jitter], jitter at most kMaxDelay
  // false: jitter never reorders (a datagram is never delivered before the one in front of it:
  // delivery = max(computed, previous delivery)); true: datagrams may overtake each other.
  bool jitterReorders = false;

  double reorder = 0;             // probability a datagram is held back by reorderDelay extra
  Microseconds reorderDelay = 0;  // at most kMaxDelay; 0: 2 x delay, or 5 ms if delay is 0

  double duplicate = 0;  // probability a datagram is delivered twice
  double corrupt = 0;    // probability one random byte is changed to a different value

  double rateBitsPerSecond = 0;     // the link's rate, >= kMinRateBitsPerSecond; 0: unlimited
  std::size_t queueLimitBytes = 0;  // drop-tail limit of the bytes waiting for the link; 0: none

  // The reorder delay in use. For profiles not validated, 2 x delay saturates instead of wrapping.
  Microseconds EffectiveReorderDelay() const {
    if (reorderDelay != 0) return reorderDelay;
    if (delay == 0) return 5000;
    return delay <= ~Microseconds{0} / 2 ? 2 * delay : ~Microseconds{0};
  }

  // Empty if the profile is usable, else what is wrong with it, naming the field and what it
  // accepts: a probability outside [0, 1], burst loss with no way out of the bad state, a time
  // above kMaxDelay, a rate that is neither 0 nor a finite rate of at least 1 bit/s.
  std::string Validate() const {
    const auto probability = [](double p) { return std::isfinite(p) && p >= 0 && p <= 1; };
    if (!probability(loss)) return "loss must be in [0, 1]";
    if (!probability(burstEnter)) return "burstEnter must be in [0, 1]";
    if (!probability(burstExit)) return "burstExit must be in [0, 1]";
    if (!probability(burstLoss)) return "burstLoss must be in [0, 1]";
    if (burstEnter > 0 && burstExit == 0) {
      return "burstEnter > 0 needs burstExit in (0, 1]: with burstExit 0 the link never leaves "
             "the bad state";
    }
    if (!probability(reorder)) return "reorder must be in [0, 1]";
    if (!probability(duplicate)) return "duplicate must be in [0, 1]";
    if (!probability(corrupt)) return "corrupt must be in [0, 1]";
    const std::string timeRange = " must be in [0, " + std::to_string(kMaxDelay) + "] us";
    if (delay > kMaxDelay) return "delay" + timeRange;
    if (jitter > kMaxDelay) return "jitter" + timeRange;
    if (reorderDelay > kMaxDelay) return "reorderDelay" + timeRange;
    if (!std::isfinite(rateBitsPerSecond) ||
        (rateBitsPerSecond != 0 && !(rateBitsPerSecond >= kMinRateBitsPerSecond))) {
      return "rateBitsPerSecond must be 0 (unlimited) or finite and >= 1 bit/s";
    }
    return {};
  }

  // One line for logs, e.g. "loss 1% delay 20 ms jitter 5 ms (FIFO) rate 10 Mbit/s".
  std::string Describe() const {
    std::string text;
    char buffer[128];
    const auto add = [&](int length) {
      if (length <= 0) return;
      if (!text.empty()) text += ' ';
      text.append(buffer, static_cast<std::size_t>(length) < sizeof buffer
                              ? static_cast<std::size_t>(length)
                              : sizeof buffer - 1);
    };
    const auto ms = [](Microseconds us) { return static_cast<double>(us) / 1000.0; };
    if (loss > 0) add(std::snprintf(buffer, sizeof buffer, "loss %g%%", loss * 100));
    if (burstEnter > 0) {
      add(std::snprintf(buffer, sizeof buffer, "burst (enter %g%%, exit %g%%, loss %g%%)",
                        burstEnter * 100, burstExit * 100, burstLoss * 100));
    }
    if (delay > 0) add(std::snprintf(buffer, sizeof buffer, "delay %g ms", ms(delay)));
    if (jitter > 0) {
      add(std::snprintf(buffer, sizeof buffer, "jitter %g ms (%s)", ms(jitter),
                        jitterReorders ? "may reorder" : "FIFO"));
    }
    if (reorder > 0) {
      add(std::snprintf(buffer, sizeof buffer, "reorder %g%% by %g ms", reorder * 100,
                        ms(EffectiveReorderDelay())));
    }
    if (duplicate > 0) {
      add(std::snprintf(buffer, sizeof buffer, "duplicate %g%%", duplicate * 100));
    }
    if (corrupt > 0) add(std::snprintf(buffer, sizeof buffer, "corrupt %g%%", corrupt * 100));
    if (rateBitsPerSecond > 0) {
      add(std::snprintf(buffer, sizeof buffer, "rate %g Mbit/s", rateBitsPerSecond / 1e6));
      if (queueLimitBytes > 0) {
        add(std::snprintf(buffer, sizeof buffer, "queue %zu B", queueLimitBytes));
      } else {
        add(std::snprintf(buffer, sizeof buffer, "queue unlimited"));
      }
    }
    if (text.empty()) text = "no impairment";
    return text;
  }
};

// What happened to one direction's datagrams. `out` counts deliveries (a duplicated datagram is
// delivered twice), so in = out + dropped* - duplicated when nothing is pending.
struct LinkCounters {
  std::uint64_t in = 0;            // datagrams that arrived
  std::uint64_t out = 0;           // deliveries decided (the relay sends each at its delivery time)
  std::uint64_t droppedLoss = 0;   // Bernoulli loss
  std::uint64_t droppedBurst = 0;  // Gilbert-Elliott loss
  std::uint64_t droppedQueue = 0;  // drop-tail at the rate-limited link
  std::uint64_t duplicated = 0;    // datagrams delivered twice
  std::uint64_t reordered = 0;     // deliveries held back by reorderDelay
  std::uint64_t corrupted = 0;     // datagrams with one byte changed
  std::uint64_t bytesIn = 0;
  std::uint64_t bytesOut = 0;  // bytes of the deliveries
  // Filled by ImpairmentRelay only (always 0 in LinkModel): receive errors counted and skipped
  // on the sockets this direction reads from (e.g. ICMP connection refused, a datagram cut short
  // by the receive buffer), and deliveries the socket refused (would block, no route...) or that
  // had no socket: lost.
  std::uint64_t receiveErrors = 0;
  std::uint64_t sendErrors = 0;
};

}  // namespace timerwheel::relay
