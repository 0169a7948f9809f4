#include "Relay/OptionValues.h"

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace timerwheel::relay {
namespace {

// 1e6 Mbit/s = 1 Tbit/s: beyond any interface the relay could drive. Not a safety bound (a faster
// link only shortens the times, ImpairmentProfile.h), a typo guard.
constexpr double kMaxRateMbit = 1e6;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [sign] digits [. digits] [e [sign] digits], with a digit before the exponent.
bool IsDecimalNumber(const std::string& text) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    return i - start;
  };
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  std::size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == text.size();
}

// `value` without an exponent or trailing zeros, for messages: 0.000001, 1000000.
std::string Plain(double value) {
  char buffer[64];
  const int length = std::snprintf(buffer, sizeof buffer, "%.9f", value);
  std::string text(buffer, length > 0 ? static_cast<std::size_t>(length) : 0);
  if (text.find('.') != std::string::npos) {
    while (!text.empty() && text.back() == '0') text.pop_back();
    if (!text.empty() && text.back() == '.') text.pop_back();
  }
  return text;
}

}  // namespace

std::uint64_t ParseUnsigned(const std::string& option, const std::string& text,
                            std::uint64_t maximum) {
  const std::string range = "[0, " + std::to_string(maximum) + "]";
  bool digitsOnly = !text.empty();
  for (const char c : text) digitsOnly = digitsOnly && IsDigit(c);
  if (!digitsOnly) {
    throw UsageError(option + ": '" + text + "' is not a decimal integer in " + range);
  }
  std::uint64_t value = 0;
  bool inRange = true;
  for (std::size_t i = 0; i < text.size() && inRange; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    inRange = value <= maximum / 10 && digit <= maximum - value * 10;
    if (inRange) value = value * 10 + digit;
  }
  if (!inRange) throw UsageError(option + ": " + text + " is out of range " + range);
  return value;
}

std::uint16_t ParsePort(const std::string& option, const std::string& text) {
  return static_cast<std::uint16_t>(ParseUnsigned(option, text, 65535));
}

double ParseNumber(const std::string& option, const std::string& text) {
  if (!IsDecimalNumber(text)) throw UsageError(option + ": '" + text + "' is not a number");
  // The program never calls setlocale, so strtod reads '.' as the decimal point.
  const double value = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(value)) throw UsageError(option + ": " + text + " is out of range");
  return value;
}

double ParseInRange(const std::string& option, const std::string& text, double minimum,
                    double maximum) {
  const double value = ParseNumber(option, text);
  if (value < minimum || value > maximum) {
    throw UsageError(option + ": " + text + " is out of range [" + Plain(minimum) + ", " +
                     Plain(maximum) + "]");
  }
  return value;
}

double ParseProbability(const std::string& option, const std::string& text) {
  return ParseInRange(option, text, 0, 1);
}

Microseconds ParseMilliseconds(const std::string& option, const std::string& text) {
  const double ms = ParseInRange(option, text, 0, static_cast<double>(kMaxDelay) / 1000);
  return static_cast<Microseconds>(std::llround(ms * 1000));
}

double ParseRateMbit(const std::string& option, const std::string& text) {
  const double bits = ParseNumber(option, text) * 1e6;
  // The range is checked in bit/s, as Validate checks it, so the two always agree.
  if (bits != 0 && !(bits >= kMinRateBitsPerSecond && bits <= kMaxRateMbit * 1e6)) {
    throw UsageError(option + ": " + text + " is out of range: 0 (unlimited) or from " +
                     Plain(kMinRateBitsPerSecond / 1e6) + " (1 bit/s) to " + Plain(kMaxRateMbit) +
                     " (1 Tbit/s)");
  }
  return bits == 0 ? 0 : bits;  // -0 too
}

}  // namespace timerwheel::relay
