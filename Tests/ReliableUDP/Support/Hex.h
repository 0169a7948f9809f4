// Hexadecimal test vectors as bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace timerwheel::test {

inline std::vector<std::uint8_t> FromHex(const std::string& hex) {
  auto digit = [](char c) -> std::uint8_t {
    if (c >= '0' && c <= '9') return static_cast<std::uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<std::uint8_t>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<std::uint8_t>(c - 'A' + 10);
    throw std::invalid_argument("not a hex digit");
  };
  if (hex.size() % 2 != 0) throw std::invalid_argument("odd number of hex digits");
  std::vector<std::uint8_t> bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::uint8_t>(digit(hex[2 * i]) << 4 | digit(hex[2 * i + 1]));
  }
  return bytes;
}

template <std::size_t N>
std::array<std::uint8_t, N> ArrayFromHex(const std::string& hex) {
  const auto bytes = FromHex(hex);
  if (bytes.size() != N) throw std::invalid_argument("wrong number of bytes");
  std::array<std::uint8_t, N> result{};
  for (std::size_t i = 0; i < N; ++i) result[i] = bytes[i];
  return result;
}

}  // namespace timerwheel::test
