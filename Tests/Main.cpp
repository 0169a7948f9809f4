// The test runner's entry point, compiled once into TestRunnerMain and linked into every suite
// (Debian's libCatch2WithMain.a exists only for the host, so the suite brings its own main and
// builds the same way for Linux and MinGW).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
