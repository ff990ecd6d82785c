# Fails when a translation unit of a sanitizer build is compiled without the sanitizer.
#
# Usage: cmake -DCOMPILE_COMMANDS=<build>/compile_commands.json -DSANITIZE=<WANDURA_SANITIZE>
#          -P sanitized_everywhere.cmake
#
# One uninstrumented object is enough to blind ThreadSanitizer: inline library functions (libstdc++'s shared_ptr
# reference counting among them) are emitted once per object and the linker keeps a single out-of-line copy for the
# whole executable, so an uninstrumented copy can serve every instrumented caller and its atomics go unseen. Each
# shared_ptr released on another thread then reads as a data race.
if(NOT COMPILE_COMMANDS OR NOT SANITIZE)
  message(FATAL_ERROR "usage: cmake -DCOMPILE_COMMANDS=<file> -DSANITIZE=<sanitizers> -P sanitized_everywhere.cmake")
endif()
file(READ ${COMPILE_COMMANDS} commands)
string(JSON count LENGTH "${commands}")
if(count EQUAL 0)
  message(FATAL_ERROR "${COMPILE_COMMANDS} lists no translation unit")
endif()
set(flag "-fsanitize=${SANITIZE}")
set(missing "")
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  string(JSON command ERROR_VARIABLE no_command GET "${commands}" ${i} command)
  if(no_command) # generators that write "arguments" instead of "command"
    string(JSON command GET "${commands}" ${i} arguments)
  endif()
  string(FIND "${command}" "${flag}" at)
  if(at EQUAL -1)
    list(APPEND missing ${file})
  endif()
endforeach()
list(LENGTH missing missing_count)
if(missing_count GREATER 0)
  list(JOIN missing "\n  " missing)
  message(FATAL_ERROR "${missing_count} of ${count} translation units are compiled without ${flag}:\n  ${missing}")
endif()
message(STATUS "all ${count} translation units are compiled with ${flag}")
