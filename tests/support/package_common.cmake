# What the package tests (package_consumer.cmake, package_deb.cmake) share: running a step, and building and running
# examples/consumer against an installed tree, its optional components included.
#
# Variables the including script gets from ctest: SOURCE_DIR, WORK_DIR, GENERATOR, CONFIG, and COMPONENTS, the
# optional components the build tree built, comma-separated (the consumer must find and run each of them).

# run(<command> <args>...): runs it; fails the test with its output unless it exits 0.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

set(config ${CONFIG})
if(NOT config)
  set(config Release)
endif()
string(REPLACE "," ";" components "${COMPONENTS}")

# build_and_run_consumer(<prefix> <cmake args>...): configures, builds and runs examples/consumer against the
# package installed under <prefix>; each built component's program (wandura_consumer_<component>) must have been
# built, which it is only when find_package found the component, and must run.
function(build_and_run_consumer prefix)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${config} ${ARGN})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  run(${WORK_DIR}/build/wandura_consumer)
  foreach(component IN LISTS components)
    if(NOT EXISTS ${WORK_DIR}/build/wandura_consumer_${component})
      message(FATAL_ERROR "examples/consumer did not find the ${component} component in ${prefix}")
    endif()
    run(${WORK_DIR}/build/wandura_consumer_${component})
  endforeach()
endfunction()
