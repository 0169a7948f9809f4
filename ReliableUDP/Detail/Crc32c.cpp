// CRC-32C computed with the SSE4.2 CRC32 instruction when the processor has it (asked once, at
// run time, so a baseline x86-64 build uses it too), else with slicing-by-8 tables. Every
// datagram is sealed and checked with it: on the project's test machine a 1,200-byte datagram
// takes 112 ns with the instruction and 528 ns with the tables (Perf/RESULTS.md, issue 19).
#include "ReliableUDP/Detail/Crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#define TIMERWHEEL_RUDP_CRC32C_X86 1
#include <nmmintrin.h>
#if defined(_MSC_VER)
#include <intrin.h>  // __cpuid
#endif
#if defined(__GNUC__) || defined(__clang__)
// Compiled for SSE4.2 whatever the unit's flags; called only when the processor has it.
#define TIMERWHEEL_RUDP_CRC32C_TARGET __attribute__((target("sse4.2")))
#else
// MSVC lets any function use any intrinsic; the caller checks the processor first.
#define TIMERWHEEL_RUDP_CRC32C_TARGET
#endif
#endif

namespace timerwheel::rudp::detail {
namespace {

// Reflected form of the Castagnoli polynomial 0x1EDC6F41.
constexpr std::uint32_t kPolynomial = 0x82F63B78u;

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of byte b followed by k
// zero bytes, which lets eight input bytes be folded in with eight independent lookups.
constexpr Tables MakeTables() noexcept {
  Tables tables{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
    tables[0][byte] = crc;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t byte = 0; byte < 256; ++byte) {
      const std::uint32_t previous = tables[k - 1][byte];
      tables[k][byte] = (previous >> 8) ^ tables[0][previous & 0xFFu];
    }
  }
  return tables;
}

constexpr Tables kTables = MakeTables();

// Assembled byte by byte so the result is the same on any host byte order and alignment.
inline std::uint32_t LoadLittle32(const std::uint8_t* p) noexcept {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}

std::uint32_t UpdateWithTables(std::uint32_t state, const std::uint8_t* data,
                               std::size_t size) noexcept {
  while (size >= 8) {
    const std::uint32_t low = state ^ LoadLittle32(data);
    const std::uint32_t high = LoadLittle32(data + 4);
    state = kTables[7][low & 0xFFu] ^ kTables[6][(low >> 8) & 0xFFu] ^
            kTables[5][(low >> 16) & 0xFFu] ^ kTables[4][low >> 24] ^ kTables[3][high & 0xFFu] ^
            kTables[2][(high >> 8) & 0xFFu] ^ kTables[1][(high >> 16) & 0xFFu] ^
            kTables[0][high >> 24];
    data += 8;
    size -= 8;
  }
  while (size > 0) {
    state = (state >> 8) ^ kTables[0][(state ^ *data) & 0xFFu];
    ++data;
    --size;
  }
  return state;
}

#if defined(TIMERWHEEL_RUDP_CRC32C_X86)

// x86 is little-endian, so a word loaded from memory is the eight bytes in CRC order.
TIMERWHEEL_RUDP_CRC32C_TARGET std::uint32_t UpdateWithInstruction(std::uint32_t state,
                                                                  const std::uint8_t* data,
                                                                  std::size_t size) noexcept {
  std::uint64_t wide = state;
  while (size >= 8) {
    std::uint64_t word;
    std::memcpy(&word, data, sizeof word);
    wide = _mm_crc32_u64(wide, word);
    data += 8;
    size -= 8;
  }
  state = static_cast<std::uint32_t>(wide);
  while (size > 0) {
    state = _mm_crc32_u8(state, *data);
    ++data;
    --size;
  }
  return state;
}

bool ProcessorHasCrc32Instruction() noexcept {
#if defined(_MSC_VER)
  int registers[4] = {};
  __cpuid(registers, 1);
  return (registers[2] & (1 << 20)) != 0;  // ECX bit 20: SSE4.2
#else
  __builtin_cpu_init();  // may run before libgcc's own constructor has
  return __builtin_cpu_supports("sse4.2") != 0;
#endif
}

#endif

}  // namespace

bool Crc32cUsesInstruction() noexcept {
#if defined(TIMERWHEEL_RUDP_CRC32C_X86)
  static const bool hasInstruction = ProcessorHasCrc32Instruction();
  return hasInstruction;
#else
  return false;
#endif
}

std::uint32_t Crc32cWithTables(const std::uint8_t* data, std::size_t size,
                               std::uint32_t crc) noexcept {
  return ~UpdateWithTables(~crc, data, size);
}

std::uint32_t Crc32c(const std::uint8_t* data, std::size_t size, std::uint32_t crc) noexcept {
  // The register is kept inverted so a finished CRC can be passed back in to continue it.
#if defined(TIMERWHEEL_RUDP_CRC32C_X86)
  if (Crc32cUsesInstruction()) return ~UpdateWithInstruction(~crc, data, size);
#endif
  return ~UpdateWithTables(~crc, data, size);
}

}  // namespace timerwheel::rudp::detail
