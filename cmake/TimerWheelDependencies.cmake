# Third-party dependencies, all from Debian packages (nothing is vendored):
#   Threads::Threads   the platform thread library
#   Boost::headers     Boost 1.74 headers (Boost.Asio is header-only)
#   Sodium::Sodium     libsodium (cmake/FindSodium.cmake): Debian's libsodium-dev natively, a
#                      static cross build in build/deps/mingw for MinGW (tools/build-mingw-sodium),
#                      vcpkg's libsodium for MSVC
#   Catch2::Catch2     Catch2 2.13 single header, plus include(Catch) for
#                      catch_discover_tests   (only when tests or perf are built)
#
# Natively these come from the packages' own CMake configs. In a cross build the
# build machine's configs would hand the cross compiler all of /usr/include, so
# the targets are recreated from the header trees alone (TimerWheelHostHeaders).
include_guard(GLOBAL)

find_package(Threads REQUIRED)
find_package(Sodium REQUIRED)

set(_timerwheel_need_catch2 OFF)
if(TIMERWHEEL_BUILD_TESTS OR TIMERWHEEL_BUILD_PERF)
  set(_timerwheel_need_catch2 ON)
endif()

if(CMAKE_CROSSCOMPILING)
  include(TimerWheelHostHeaders)
  timerwheel_host_boost_headers()
  if(_timerwheel_need_catch2)
    timerwheel_host_header_target(Catch2::Catch2 catch2 catch2/catch.hpp)
    # Catch.cmake (catch_discover_tests) is a build machine script: find it
    # outside the cross sysroot.
    find_path(TIMERWHEEL_CATCH2_CMAKE_DIR NAMES Catch.cmake
              PATHS /usr/lib/cmake/Catch2 /usr/local/lib/cmake/Catch2 /usr/share/Catch2/cmake
              NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
    if(NOT TIMERWHEEL_CATCH2_CMAKE_DIR)
      message(FATAL_ERROR "Catch.cmake not found: install the Debian package catch2 "
                          "or set TIMERWHEEL_CATCH2_CMAKE_DIR")
    endif()
    list(APPEND CMAKE_MODULE_PATH "${TIMERWHEEL_CATCH2_CMAKE_DIR}")
  endif()
else()
  find_package(Boost 1.74 REQUIRED)
  if(_timerwheel_need_catch2)
    # Catch2's config adds its directory to CMAKE_MODULE_PATH for include(Catch).
    find_package(Catch2 2.13 REQUIRED)
  endif()
endif()

if(_timerwheel_need_catch2)
  include(Catch)
endif()

# Cross builds for Windows run their programs (tests, and the test discovery
# that catch_discover_tests does right after linking) under Wine.
if(CMAKE_CROSSCOMPILING AND WIN32 AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
  include(TimerWheelWine)
endif()
