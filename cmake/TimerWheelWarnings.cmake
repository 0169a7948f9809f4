# timerwheel_target_warnings(<target>)
#
# Turns on the project's warning set for one target. Warnings are a property of
# our own targets, never of CMAKE_CXX_FLAGS, so projects that consume TimerWheel
# do not inherit them.
#
# TIMERWHEEL_WARNINGS_AS_ERRORS (default OFF, so a newer compiler's new warning
# never breaks someone else's build) makes them errors: -Werror or /WX. Every
# preset that tools/test builds turns it on (CMakePresets.json, the hidden
# preset "warnings-as-errors"), so CI fails on any warning.
option(TIMERWHEEL_WARNINGS_AS_ERRORS "Treat the project's compiler warnings as errors" OFF)

function(timerwheel_target_warnings target)
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    return()  # an interface target has no sources of its own to warn about
  endif()
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 /permissive-)
    if(TIMERWHEEL_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE /WX)
    endif()
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
    if(TIMERWHEEL_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
