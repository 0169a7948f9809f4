# Install and export rules: find_package(TimerWheel) from an install tree gives
# TimerWheel::TimerQueue, TimerWheel::AsioTimerQueue, TimerWheel::TimerWheel and
# TimerWheel::ReliableUDP: whichever of them this build has.
#
# Layout:
#   <libdir>/                             the libraries
#   <includedir>/timerwheel/TimerQueue/   every *.h of TimerQueue/ (Core/ and Detail/ too)
#   <includedir>/timerwheel/TimerWheel/   every *.h of TimerWheel/
#   <includedir>/timerwheel/ReliableUDP/  every *.h of ReliableUDP/ (Detail/ too)
#   <libdir>/cmake/TimerWheel/            config, version and targets files
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(TIMERWHEEL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/TimerWheel")

# Only the libraries that exist so far (each exported as TimerWheel::<target>).
set(_timerwheel_targets "")
# UdpSocketSetup is ReliableUDP's private dependency: exported (a static library's
# $<LINK_ONLY:...> needs it), its header not installed.
foreach(_target IN ITEMS TimerQueue AsioTimerQueue TimerWheel ReliableUdpEngine UdpSocketSetup ReliableUDP)
  if(TARGET ${_target})
    list(APPEND _timerwheel_targets ${_target})
  endif()
endforeach()

if(NOT _timerwheel_targets)
  return()  # nothing to install yet
endif()

install(TARGETS ${_timerwheel_targets}
  EXPORT TimerWheelTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")

# Headers keep their paths below the library folder, so that an installed
# #include "TimerQueue/Core/TimerPool.h" means what it means in the source tree.
foreach(_dir IN ITEMS TimerQueue TimerWheel ReliableUDP)
  if(NOT TARGET ${_dir})
    continue()
  endif()
  file(GLOB_RECURSE _headers CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}"
       "${PROJECT_SOURCE_DIR}/${_dir}/*.h")
  foreach(_header IN LISTS _headers)
    get_filename_component(_header_dir "${_header}" DIRECTORY)
    install(FILES "${PROJECT_SOURCE_DIR}/${_header}"
            DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/timerwheel/${_header_dir}")
  endforeach()
endforeach()

# Which dependencies the exported targets (and, for static libraries, their
# $<LINK_ONLY:...> private dependencies) refer to, so that the config file asks
# a consumer's build for exactly those.
# ReliableUDP needs Boost only through TimerWheel::AsioTimerQueue, which is
# installed with it, so the Boost::headers test below covers it too.
set(TIMERWHEEL_CONFIG_NEEDS_THREADS FALSE)
set(TIMERWHEEL_CONFIG_NEEDS_BOOST FALSE)
set(TIMERWHEEL_CONFIG_NEEDS_SODIUM FALSE)
foreach(_target IN LISTS _timerwheel_targets)
  get_target_property(_libs ${_target} INTERFACE_LINK_LIBRARIES)
  if(_libs MATCHES "Threads::")
    set(TIMERWHEEL_CONFIG_NEEDS_THREADS TRUE)
  endif()
  if(_libs MATCHES "Boost::")
    set(TIMERWHEEL_CONFIG_NEEDS_BOOST TRUE)
  endif()
  if(_libs MATCHES "Sodium::")
    set(TIMERWHEEL_CONFIG_NEEDS_SODIUM TRUE)
  endif()
endforeach()
# Where this build found libsodium: the consumer's first guess (a cross build's libsodium lives
# outside the sysroot, in build/deps/mingw); a consumer's own Sodium_ROOT wins.
set(TIMERWHEEL_CONFIG_SODIUM_ROOT "")
if(Sodium_INCLUDE_DIR)
  get_filename_component(TIMERWHEEL_CONFIG_SODIUM_ROOT "${Sodium_INCLUDE_DIR}" DIRECTORY)
endif()

install(EXPORT TimerWheelTargets
  NAMESPACE TimerWheel::
  FILE TimerWheelTargets.cmake
  DESTINATION "${TIMERWHEEL_INSTALL_CMAKEDIR}")

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/TimerWheelConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/TimerWheelConfig.cmake"
  INSTALL_DESTINATION "${TIMERWHEEL_INSTALL_CMAKEDIR}")
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/TimerWheelConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/TimerWheelConfig.cmake"
  "${PROJECT_BINARY_DIR}/TimerWheelConfigVersion.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/TimerWheelHostHeaders.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/FindSodium.cmake"
  DESTINATION "${TIMERWHEEL_INSTALL_CMAKEDIR}")
