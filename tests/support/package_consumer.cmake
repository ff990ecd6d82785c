# Installs the built tree into a scratch prefix, then configures, builds and runs examples/consumer against it
# with find_package(wandura), each optional component the tree built included, and checks the pkg-config files
# (CXX_COMPILER builds the core's, the emulator's and the fleet's programs with nothing else, and every installed
# header compiles with them, with clang too when there is one). Then checks what
# find_package says about components: the built ones load when required; an unknown one, one the installation lacks
# and one whose dependency is missing each fail with the reason; optional ones are left out with a note; the core
# alone needs no component's dependency. Fails if any step fails.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/package_common.cmake)
file(REMOVE_RECURSE ${WORK_DIR})

run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${WORK_DIR}/prefix --config ${config})
build_and_run_consumer(${WORK_DIR}/prefix)

# The pkg-config files must describe the same install: the core's and each component's.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${WORK_DIR}/prefix/lib/pkgconfig)
  run(${PKG_CONFIG} --exists --print-errors wandura)
  foreach(component IN LISTS components)
    run(${PKG_CONFIG} --exists --print-errors wandura-${component})
    execute_process(COMMAND ${PKG_CONFIG} --libs wandura-${component} OUTPUT_VARIABLE libs COMMAND_ERROR_IS_FATAL ANY)
    if(NOT libs MATCHES "-lwandura_${component} .*-lwandura ")
      message(FATAL_ERROR "wandura-${component}.pc does not link its library before wandura's: ${libs}")
    endif()
  endforeach()
  # The consumer's programs build and run with nothing but pkg-config's flags: the core's alone (wandura.pc names
  # no component's library), the emulator's and the fleet component's.
  function(build_and_run_by_pkg_config module program)
    execute_process(COMMAND ${PKG_CONFIG} --cflags --libs ${module} OUTPUT_VARIABLE flags COMMAND_ERROR_IS_FATAL ANY)
    separate_arguments(flags UNIX_COMMAND "${flags}")
    run(${CXX_COMPILER} ${SOURCE_DIR}/examples/consumer/${program}.cpp ${flags} -o ${WORK_DIR}/${program}_by_pkg_config)
    run(${WORK_DIR}/${program}_by_pkg_config)
  endfunction()
  build_and_run_by_pkg_config(wandura main)
  foreach(component IN ITEMS emulator fleet)
    if(component IN_LIST components)
      build_and_run_by_pkg_config(wandura-${component} ${component})
    endif()
  endforeach()

  # Every installed header compiles with the package's flags alone and the strictest warnings, with this build's
  # compiler and with clang when there is one (Asio 1.22 does not find C++20 coroutines on clang by itself: the
  # package's flags must say so).
  file(GLOB_RECURSE headers RELATIVE ${WORK_DIR}/prefix/include ${WORK_DIR}/prefix/include/wandura/*.hpp)
  set(every_header "")
  foreach(header IN LISTS headers)
    string(APPEND every_header "#include <${header}>\n")
  endforeach()
  file(WRITE ${WORK_DIR}/every_header.cpp "${every_header}int main() { return 0; }\n")
  set(modules wandura)
  foreach(component IN LISTS components)
    list(APPEND modules wandura-${component})
  endforeach()
  execute_process(COMMAND ${PKG_CONFIG} --cflags ${modules} OUTPUT_VARIABLE flags COMMAND_ERROR_IS_FATAL ANY)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  find_program(CLANGXX NAMES clang++-16 clang++)
  foreach(compiler IN ITEMS ${CXX_COMPILER} ${CLANGXX})
    message(STATUS "every installed header with ${compiler}")
    run(${compiler} -fsyntax-only -Wall -Wextra -Wpedantic -Werror ${flags} ${WORK_DIR}/every_header.cpp)
  endforeach()
endif()

# probe(<name> PASS|FAIL <regex> <prefix> <find_package arguments> [<cmake args>...]): configures a project that
# calls find_package(wandura 0.1 REQUIRED <find_package arguments>) and lists the wandura targets it got; the
# configure must succeed (PASS) or fail (FAIL), and its output must match <regex>. Sets probe_output.
function(probe name expect regex prefix arguments)
  set(dir ${WORK_DIR}/probe-${name})
  file(WRITE ${dir}/src/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.25)
project(wandura_probe LANGUAGES CXX)
separate_arguments(arguments UNIX_COMMAND "${PROBE_ARGUMENTS}")
find_package(wandura 0.1 REQUIRED ${arguments})
foreach(target IN ITEMS wandura::wandura wandura::emulator wandura::fleet wandura::prometheus)
  if(TARGET ${target})
    message(STATUS "probe target: ${target}")
  endif()
endforeach()
]=])
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${dir}/src -B ${dir}/build -G ${GENERATOR}
                          -DCMAKE_PREFIX_PATH=${prefix} "-DPROBE_ARGUMENTS=${arguments}" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(out "${out}${err}")
  if((expect STREQUAL "PASS" AND NOT rc EQUAL 0) OR (expect STREQUAL "FAIL" AND rc EQUAL 0))
    message(FATAL_ERROR "probe ${name}: find_package(wandura 0.1 REQUIRED ${arguments}) should ${expect}:\n${out}")
  endif()
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "probe ${name}: the output does not match '${regex}':\n${out}")
  endif()
  message(STATUS "probe ${name}: ${expect} as expected")
  set(probe_output "${out}" PARENT_SCOPE)
endfunction()

# Fails unless the last probe's output lacks <target>.
function(expect_no_target target)
  string(FIND "${probe_output}" "probe target: ${target}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the probe got ${target}, which it should not:\n${probe_output}")
  endif()
endfunction()

probe(unknown FAIL "component nonsense: unknown component \\(the components are: emulator, fleet, prometheus\\)"
      ${WORK_DIR}/prefix "COMPONENTS nonsense")
if(components)
  list(JOIN components " " wanted)
  probe(required PASS "probe target: wandura::wandura" ${WORK_DIR}/prefix "COMPONENTS ${wanted}")
  foreach(component IN LISTS components)
    probe(required-${component} PASS "probe target: wandura::${component}" ${WORK_DIR}/prefix
          "COMPONENTS ${component}")
  endforeach()
endif()

# An installation built without the fleet layer has no wandura-fleet-targets.cmake: this one, or a copy of it
# from which that file was removed.
set(without_fleet ${WORK_DIR}/prefix)
if("fleet" IN_LIST components)
  set(without_fleet ${WORK_DIR}/prefix-without-fleet)
  file(COPY ${WORK_DIR}/prefix/ DESTINATION ${without_fleet})
  file(GLOB fleet_exports ${without_fleet}/lib/cmake/wandura/wandura-fleet-targets*.cmake)
  file(REMOVE ${fleet_exports})
endif()
probe(not-built FAIL "component fleet: not in this installation: wandura 0.1.0 was built without it"
      ${without_fleet} "COMPONENTS fleet")
probe(not-built-optional PASS "probe target: wandura::wandura" ${without_fleet} "OPTIONAL_COMPONENTS fleet")
expect_no_target(wandura::fleet)

# A user of the core alone needs none of the components' dependencies: with libhttp-parser (which only the emulator
# links) not findable, find_package(wandura) still gives wandura::wandura, leaving the emulator out, and asking for
# the emulator fails naming what it needs.
probe(no-http-parser-implicit PASS "probe target: wandura::wandura" ${WORK_DIR}/prefix ""
      -DCMAKE_DISABLE_FIND_PACKAGE_http_parser=ON)
expect_no_target(wandura::emulator)
if("emulator" IN_LIST components)
  probe(no-http-parser FAIL "component emulator: needs libhttp-parser \\(Debian: libhttp-parser-dev\\), which"
        ${WORK_DIR}/prefix "COMPONENTS emulator" -DCMAKE_DISABLE_FIND_PACKAGE_http_parser=ON)
endif()

# The fleet component is installed but hiredis cannot be found on this machine.
if("fleet" IN_LIST components)
  probe(no-hiredis FAIL "component fleet: needs hiredis [0-9.]+\\.\\.\\.<[0-9.]+ \\(Debian: libhiredis-dev\\), which"
        ${WORK_DIR}/prefix "COMPONENTS fleet" -DCMAKE_DISABLE_FIND_PACKAGE_hiredis=ON)
  # Without a component list the package loads what it can: the core, without the fleet layer.
  probe(no-hiredis-implicit PASS "probe target: wandura::wandura" ${WORK_DIR}/prefix ""
        -DCMAKE_DISABLE_FIND_PACKAGE_hiredis=ON)
  expect_no_target(wandura::fleet)
endif()
