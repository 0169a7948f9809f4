# FindSodium: libsodium as the imported target Sodium::Sodium.
#
#   find_package(Sodium [REQUIRED])
#
# Where it looks, in order:
#   - vcpkg's libsodium port (its CMake config, unofficial-sodium), for MSVC builds;
#   - Sodium_ROOT (a prefix with include/sodium.h and lib/libsodium.*), searched as given even in
#     a cross build: the mingw preset points it at build/deps/mingw, where
#     tools/build-mingw-sodium builds a static libsodium for Windows (Debian has no MinGW package);
#   - the usual places (Debian's libsodium-dev: /usr/include, /usr/lib/<multiarch>).
# Sets Sodium_FOUND, Sodium_INCLUDE_DIR, Sodium_LIBRARY.
#
# Installed next to TimerWheelConfig.cmake, which finds libsodium for consumers with it.
include_guard(GLOBAL)
include(FindPackageHandleStandardArgs)

if(TARGET Sodium::Sodium)
  set(Sodium_FOUND TRUE)
  return()
endif()

find_package(unofficial-sodium CONFIG QUIET)
if(TARGET unofficial-sodium::sodium)
  add_library(Sodium::Sodium INTERFACE IMPORTED)
  set_target_properties(Sodium::Sodium PROPERTIES INTERFACE_LINK_LIBRARIES unofficial-sodium::sodium)
  set(Sodium_FOUND TRUE)
  return()
endif()

if(Sodium_ROOT)
  # NO_CMAKE_FIND_ROOT_PATH: a cross toolchain would otherwise look for Sodium_ROOT inside its
  # sysroot; this prefix holds libraries built for the target, outside the sysroot on purpose.
  find_path(Sodium_INCLUDE_DIR NAMES sodium.h PATHS "${Sodium_ROOT}/include"
            NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  find_library(Sodium_LIBRARY NAMES sodium libsodium PATHS "${Sodium_ROOT}/lib"
               NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
endif()
find_path(Sodium_INCLUDE_DIR NAMES sodium.h)
find_library(Sodium_LIBRARY NAMES sodium libsodium)

find_package_handle_standard_args(Sodium REQUIRED_VARS Sodium_LIBRARY Sodium_INCLUDE_DIR)

if(Sodium_FOUND)
  add_library(Sodium::Sodium UNKNOWN IMPORTED)
  set_target_properties(Sodium::Sodium PROPERTIES
    IMPORTED_LOCATION "${Sodium_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Sodium_INCLUDE_DIR}")
  if(Sodium_LIBRARY MATCHES "\\.a$")
    # A static libsodium brings its own dependencies: the thread library (its one-time
    # initialisation), and on Windows advapi32 (RtlGenRandom, its random numbers); there its
    # header declares every function __declspec(dllimport) unless SODIUM_STATIC is defined.
    find_package(Threads REQUIRED)
    set_property(TARGET Sodium::Sodium APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
    if(WIN32)
      set_property(TARGET Sodium::Sodium APPEND PROPERTY INTERFACE_LINK_LIBRARIES advapi32)
      set_property(TARGET Sodium::Sodium APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS SODIUM_STATIC)
    endif()
  endif()
endif()
mark_as_advanced(Sodium_INCLUDE_DIR Sodium_LIBRARY)
