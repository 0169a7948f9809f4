// OptionValues: the values of UdpImpairmentRelay's command-line options, parsed and range-checked.
// Numbers are decimal: an integer is digits 0-9 only (a leading 0 is not octal, 0x is not hex), a
// real number is [sign] digits [. digits] [e [sign] digits] (no hex, inf, nan or spaces). Each
// parser throws UsageError naming the option, the value and what it accepts.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "Relay/ImpairmentProfile.h"

namespace timerwheel::relay {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An integer in [0, maximum].
std::uint64_t ParseUnsigned(const std::string& option, const std::string& text,
                            std::uint64_t maximum = UINT64_MAX);
// A UDP port, [0, 65535].
std::uint16_t ParsePort(const std::string& option, const std::string& text);

// A finite real number.
double ParseNumber(const std::string& option, const std::string& text);
// A real number in [minimum, maximum].
double ParseInRange(const std::string& option, const std::string& text, double minimum,
                    double maximum);
// A probability, [0, 1].
double ParseProbability(const std::string& option, const std::string& text);
// Milliseconds in [0, kMaxDelay / 1000] (1e9 ms), returned in whole microseconds.
Microseconds ParseMilliseconds(const std::string& option, const std::string& text);
// A rate in Mbit/s: 0 (unlimited), or from kMinRateBitsPerSecond (1 bit/s, 0.000001) to 1000000
// (1 Tbit/s); returned in bit/s.
double ParseRateMbit(const std::string& option, const std::string& text);

}  // namespace timerwheel::relay
