// The test runner's entry point, compiled once into TestRunnerMain and linked into every suite
// (Debian's libCatch2WithMain.a exists only for the host, so the suite brings its own main and
// builds the same way for Linux and MinGW).
//
// Always `main`, never `wmain`: the solution builds with _UNICODE (Directory.Build.props), for
// which Catch2 would define `wmain` instead. From a static library MSVC's linker would not see
// it when it picks the entry point, and would look for `main` (LNK2019 in every suite).
#define DO_NOT_USE_WMAIN
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
