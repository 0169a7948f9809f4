# Runs the Windows programs of a MinGW cross build under Wine.
#
# CMAKE_CROSSCOMPILING_EMULATOR is set to a small generated script,
# <build>/wine-exec, rather than to wine itself, because it also has to:
#   - keep the Wine prefix inside the build directory (nothing in $HOME),
#   - create that prefix quietly and only once, even when ninja links (and so
#     runs catch_discover_tests for) two test programs at the same time,
#   - keep Wine off any display and silence its debug channels,
#   - turn the CRLF line ends of a Windows program's stdout into LF, without
#     which every test name found by catch_discover_tests would end in '\r'.
# One path and no arguments: Catch.cmake passes the emulator through a -D
# option, where a list would be split.
include_guard(GLOBAL)

# Debian's wine64 package keeps wine64 out of PATH; its `wine` launcher then
# picks the 64-bit loader by itself.
find_program(TIMERWHEEL_WINE NAMES wine64 wine)
find_program(TIMERWHEEL_WINESERVER NAMES wineserver64 wineserver)
if(NOT TIMERWHEEL_WINE OR NOT TIMERWHEEL_WINESERVER)
  message(WARNING "Wine not found: the Windows test programs will build but cannot run "
                  "(install the Debian packages wine and wine64)")
  return()
endif()

set(TIMERWHEEL_WINEPREFIX "${CMAKE_BINARY_DIR}/wineprefix")
configure_file("${CMAKE_CURRENT_LIST_DIR}/wine-exec.in" "${CMAKE_BINARY_DIR}/wine-exec" @ONLY
               FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                WORLD_READ WORLD_EXECUTE)
set(CMAKE_CROSSCOMPILING_EMULATOR "${CMAKE_BINARY_DIR}/wine-exec")
message(STATUS "Windows programs run under ${TIMERWHEEL_WINE} (prefix ${TIMERWHEEL_WINEPREFIX})")
