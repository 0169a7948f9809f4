# Header-only dependencies for a cross build (MinGW-w64 on Linux) taken from the
# build machine's Debian packages.
#
# Why not just -I/usr/include: the cross compiler would then find the build
# machine's glibc headers before its own Windows runtime headers. Instead each
# package gets a private include directory in the build tree that holds only a
# symbolic link to its own header tree (<dir>/boost -> /usr/include/boost), so
# nothing third-party is copied and nothing else from /usr/include is visible.
#
# This file is also installed next to TimerWheelConfig.cmake so that a cross
# built consumer of an installed TimerWheel can recreate the same targets.
include_guard(GLOBAL)

set(TIMERWHEEL_HOST_INCLUDE_DIR "/usr/include" CACHE PATH
    "Build machine include directory that holds the boost/ and catch2/ header trees (cross builds only)")

# timerwheel_host_header_target(<target> <subdir> <probe header>)
#   Creates the INTERFACE IMPORTED <target> whose include directory exposes
#   only ${TIMERWHEEL_HOST_INCLUDE_DIR}/<subdir>. Fails if <probe header> (a
#   path relative to the include directory) is not there.
function(timerwheel_host_header_target target subdir probe)
  if(TARGET ${target})
    return()
  endif()
  string(MAKE_C_IDENTIFIER "TIMERWHEEL_HOST_${subdir}_DIR" _var)
  string(TOUPPER "${_var}" _var)
  # NO_CMAKE_FIND_ROOT_PATH: the toolchain confines find_* to the MinGW sysroot;
  # these headers live on the build machine on purpose.
  find_path(${_var} NAMES "${probe}" PATHS "${TIMERWHEEL_HOST_INCLUDE_DIR}"
            NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  if(NOT ${_var})
    message(FATAL_ERROR "${target}: ${probe} not found in ${TIMERWHEEL_HOST_INCLUDE_DIR} "
                        "(set TIMERWHEEL_HOST_INCLUDE_DIR, or install the Debian package)")
  endif()
  set(_dir "${CMAKE_BINARY_DIR}/_host_include/${subdir}")
  file(MAKE_DIRECTORY "${_dir}")
  file(CREATE_LINK "${${_var}}/${subdir}" "${_dir}/${subdir}" SYMBOLIC)
  add_library(${target} INTERFACE IMPORTED)
  # Include directories of an imported target are used as -isystem, so the
  # project's warnings do not fire inside third-party headers.
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_dir}")
  message(STATUS "${target}: ${${_var}}/${subdir} (via ${_dir})")
endfunction()

# Boost::headers for a cross build. On Windows, Boost.Asio needs Winsock
# (ws2_32, mswsock) and a target Windows version; MSVC gets the libraries by
# #pragma comment(lib), MinGW has to be told.
function(timerwheel_host_boost_headers)
  if(TARGET Boost::headers)
    return()
  endif()
  timerwheel_host_header_target(Boost::headers boost boost/version.hpp)
  if(WIN32)
    set_property(TARGET Boost::headers APPEND PROPERTY INTERFACE_LINK_LIBRARIES ws2_32 mswsock)
    set_property(TARGET Boost::headers APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS _WIN32_WINNT=0x0A00)
  endif()
endfunction()
