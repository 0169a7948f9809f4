// CRC-32C computed with slicing-by-8 tables, or with the SSE4.2 CRC32 instruction when the
// compiler may assume it.
#include "ReliableUDP/Detail/Crc32c.h"

#include <array>

#if (defined(__x86_64__) || defined(_M_X64)) && \
    (defined(__SSE4_2__) || (defined(_MSC_VER) && defined(__AVX__)))
#define TIMERWHEEL_RUDP_CRC32C_SSE42 1
#include <nmmintrin.h>
#endif

namespace timerwheel::rudp::detail {
namespace {

#if !defined(TIMERWHEEL_RUDP_CRC32C_SSE42)

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

std::uint32_t Update(std::uint32_t state, const std::uint8_t* data, std::size_t size) noexcept {
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

#else

std::uint32_t Update(std::uint32_t state, const std::uint8_t* data, std::size_t size) noexcept {
  std::uint64_t wide = state;
  while (size >= 8) {
    std::uint64_t word = 0;
    for (int i = 7; i >= 0; --i) word = (word << 8) | data[i];
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

#endif

}  // namespace

std::uint32_t Crc32c(const std::uint8_t* data, std::size_t size, std::uint32_t crc) noexcept {
  // The register is kept inverted so a finished CRC can be passed back in to continue it.
  return ~Update(~crc, data, size);
}

}  // namespace timerwheel::rudp::detail
