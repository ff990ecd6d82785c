# Builds the Debian package of the built tree with CPack, unpacks it into a scratch root (dpkg -x, no root rights
# needed), checks that nothing in it names the build machine's source or build directory, then configures, builds
# and runs examples/consumer against the unpacked /usr with find_package(wandura). Fails if any step fails.
file(REMOVE_RECURSE ${WORK_DIR})
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

run(${CPACK_COMMAND} -G DEB --config ${BINARY_DIR}/CPackConfig.cmake -C ${config} -B ${WORK_DIR}/cpack)
file(GLOB debs ${WORK_DIR}/cpack/*.deb)
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected one .deb in ${WORK_DIR}/cpack, found: ${debs}")
endif()
execute_process(COMMAND dpkg-deb --field ${debs} Package Depends OUTPUT_VARIABLE fields COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "${fields}")
if(NOT fields MATCHES "libcurl4-openssl-dev" OR NOT fields MATCHES "libsimdjson-dev")
  message(FATAL_ERROR "the package does not depend on what its static libraries link:\n${fields}")
endif()
run(dpkg -x ${debs} ${WORK_DIR}/root)

# Relocatable: no installed CMake or pkg-config file may point into the tree the package was built from.
file(GLOB_RECURSE package_files ${WORK_DIR}/root/usr/lib/*.cmake ${WORK_DIR}/root/usr/lib/*.pc)
foreach(f IN LISTS package_files)
  file(READ ${f} text)
  foreach(dir IN ITEMS ${SOURCE_DIR} ${BINARY_DIR})
    string(FIND "${text}" "${dir}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names the build tree ${dir}")
    endif()
  endforeach()
endforeach()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/root/usr -DCMAKE_BUILD_TYPE=${config} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/wandura_consumer)
# The programs ship too and run from the unpacked tree.
run(${WORK_DIR}/root/usr/bin/wandura --version)
