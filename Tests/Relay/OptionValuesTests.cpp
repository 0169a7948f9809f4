// OptionValues: UdpImpairmentRelay's option values. Integers are decimal (a leading 0 is not octal,
// 0x is not hex), and every refusal names the option and what it accepts.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

#include "Relay/OptionValues.h"

using Catch::Matchers::Contains;
using timerwheel::relay::Microseconds;
using timerwheel::relay::ParseMilliseconds;
using timerwheel::relay::ParseNumber;
using timerwheel::relay::ParsePort;
using timerwheel::relay::ParseRateMbit;
using timerwheel::relay::ParseUnsigned;
using timerwheel::relay::UsageError;

TEST_CASE("OptionValues integers are decimal only", "[relay]") {
  CHECK(ParseUnsigned("--queue-bytes", "010") == 10);  // not 8
  CHECK(ParsePort("--listen", "0100") == 100);         // not 64
  CHECK(ParsePort("--upstream", "09000") == 9000);     // not refused as bad octal
  CHECK(ParseUnsigned("--seed", "0") == 0);
  CHECK(ParseUnsigned("--seed", "18446744073709551615") == UINT64_MAX);
  CHECK(ParsePort("--listen", "65535") == 65535);

  for (const char* bad : {"0x10", "0X10", "", " 8", "8 ", "+8", "-8", "1e3", "1.0", "0b1", "8k"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_WITH(ParseUnsigned("--queue-bytes", bad),
                      Contains("--queue-bytes") && Contains("decimal"));
  }
  CHECK_THROWS_WITH(ParseUnsigned("--seed", "18446744073709551616"),
                    Contains("--seed") && Contains("18446744073709551615"));
  CHECK_THROWS_WITH(ParsePort("--listen", "65536"), Contains("--listen") && Contains("[0, 65535]"));
  CHECK_THROWS_WITH(ParsePort("--listen", "0x50"), Contains("--listen") && Contains("decimal"));

  // Real numbers are decimal too: no hex floats, no infinities, no surrounding spaces.
  CHECK(ParseNumber("--loss", "0.25") == 0.25);
  CHECK(ParseNumber("--loss", ".5") == 0.5);
  CHECK(ParseNumber("--loss", "1e-3") == 1e-3);
  for (const char* bad : {"0x1p-2", "inf", "nan", " 0.1", "0.1 ", "", ".", "1e", "--1"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_WITH(ParseNumber("--loss", bad), Contains("--loss"));
  }
}

TEST_CASE("OptionValues --rate-mbit is 0 (unlimited) or 1 bit/s to 1 Tbit/s", "[relay]") {
  // 1e-12 Mbit/s made a 1200-byte datagram's transmission 9.6e15 us: the relay's timer overflowed.
  CHECK_THROWS_WITH(ParseRateMbit("--rate-mbit", "1e-12"),
                    Contains("--rate-mbit") && Contains("0.000001") && Contains("1000000"));
  CHECK_THROWS_WITH(ParseRateMbit("--rate-mbit", "0.0000009"), Contains("--rate-mbit"));
  CHECK_THROWS_WITH(ParseRateMbit("--rate-mbit", "1000001"), Contains("--rate-mbit"));
  CHECK_THROWS_AS(ParseRateMbit("--rate-mbit", "-1"), UsageError);
  CHECK(ParseRateMbit("--rate-mbit", "0") == 0);
  CHECK(ParseRateMbit("--rate-mbit", "0.000001") == Approx(1));
  CHECK(ParseRateMbit("--rate-mbit", "10") == Approx(10e6));
  CHECK(ParseRateMbit("--rate-mbit", "1000000") == Approx(1e12));

  CHECK(ParseMilliseconds("--delay-ms", "1000000000") == Microseconds{1'000'000'000'000});
  CHECK(ParseMilliseconds("--delay-ms", "0.0004") == 0);  // rounded to the microsecond
  CHECK_THROWS_WITH(ParseMilliseconds("--delay-ms", "1000000001"),
                    Contains("--delay-ms") && Contains("1000000000"));
}
