// Reproducible test messages: message i has a size and contents derived from i alone, so a
// receiver can check each one byte for byte and in order without a copy of what was sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace timerwheel::test {

inline std::size_t PatternSize(std::uint64_t index, std::size_t largeEvery = 50,
                               std::size_t largeSize = 100'000) {
  if (largeEvery != 0 && index % largeEvery == largeEvery - 1) return largeSize + index % 1000;
  return 1 + static_cast<std::size_t>((index * 7919) % 3000);
}

inline std::uint8_t PatternByte(std::uint64_t index, std::size_t position) {
  return static_cast<std::uint8_t>((index * 131 + position * 7 + (position >> 8)) & 0xFF);
}

inline std::vector<std::uint8_t> PatternMessage(std::uint64_t index, std::size_t size) {
  std::vector<std::uint8_t> message(size);
  for (std::size_t i = 0; i < size; ++i) message[i] = PatternByte(index, i);
  return message;
}

// Checks that `message` is message `index` of `size` bytes; returns "" or what is wrong.
inline std::string CheckPattern(const std::vector<std::uint8_t>& message, std::uint64_t index,
                                std::size_t size) {
  if (message.size() != size) {
    return "message " + std::to_string(index) + " has " + std::to_string(message.size()) +
           " bytes, expected " + std::to_string(size);
  }
  for (std::size_t i = 0; i < size; ++i) {
    if (message[i] != PatternByte(index, i)) {
      return "message " + std::to_string(index) + " differs at byte " + std::to_string(i);
    }
  }
  return {};
}

}  // namespace timerwheel::test
