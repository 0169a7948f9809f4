# Toolchain: 64-bit Windows programs built on Debian with MinGW-w64
# (package g++-mingw-w64-x86-64-posix: the "posix" thread model, which has
# std::thread and std::mutex), run under Wine.
#
#   cmake --preset mingw        or
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake ...
#
# The test emulator (Wine) is set up by the project, see TimerWheelWine.cmake.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(_triple x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${_triple}-gcc-posix)
set(CMAKE_CXX_COMPILER ${_triple}-g++-posix)
set(CMAKE_RC_COMPILER ${_triple}-windres)

# Search the MinGW sysroot for headers, libraries and packages, never the build
# machine's (whose glibc headers and Linux libraries would be picked up);
# programs (tools run during the build) come from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/${_triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Link everything statically (libstdc++, libgcc, winpthread), so the .exe files
# run under Wine without any MinGW DLLs on its PATH.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static-libgcc -static-libstdc++")
