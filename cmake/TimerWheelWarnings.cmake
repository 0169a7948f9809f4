# timerwheel_target_warnings(<target>)
#
# Turns on the project's warning set for one target. Warnings are a property of
# our own targets, never of CMAKE_CXX_FLAGS, so projects that consume TimerWheel
# do not inherit them, and nothing is ever made an error here (use
# -DCMAKE_COMPILE_WARNING_AS_ERROR=ON, CMake >= 3.24, for that).
function(timerwheel_target_warnings target)
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    return()  # an interface target has no sources of its own to warn about
  endif()
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 /permissive-)
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  endif()
endfunction()
