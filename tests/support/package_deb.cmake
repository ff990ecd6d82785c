# Builds the Debian package of the built tree with CPack, unpacks it into a scratch root (dpkg -x, no root rights
# needed), checks its relations and that nothing in it names the build machine's source or build directory, then
# configures, builds and runs examples/consumer against the unpacked /usr with find_package(wandura), each optional
# component the tree built included. Fails if any step fails.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/package_common.cmake)
file(REMOVE_RECURSE ${WORK_DIR})

run(${CPACK_COMMAND} -G DEB --config ${BINARY_DIR}/CPackConfig.cmake -C ${config} -B ${WORK_DIR}/cpack)
file(GLOB debs ${WORK_DIR}/cpack/*.deb)
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected one .deb in ${WORK_DIR}/cpack, found: ${debs}")
endif()

# Depends: what the core's static libraries link. Recommends: what the components' link, and only for the
# components in the package (a user of the core alone need not install them).
function(deb_field field out)
  execute_process(COMMAND dpkg-deb --field ${debs} ${field} OUTPUT_VARIABLE value COMMAND_ERROR_IS_FATAL ANY)
  string(STRIP "${value}" value)
  message(STATUS "${field}: ${value}")
  set(${out} "${value}" PARENT_SCOPE)
endfunction()
deb_field(Depends depends)
deb_field(Recommends recommends)
if(NOT depends MATCHES "libcurl4-openssl-dev" OR NOT depends MATCHES "libsimdjson-dev")
  message(FATAL_ERROR "the package does not depend on what its static libraries link:\n${depends}")
endif()
foreach(component IN ITEMS fleet prometheus)
  if(component STREQUAL "fleet")
    set(package libhiredis-dev)
  else()
    set(package prometheus-cpp-dev)
  endif()
  string(FIND "${depends}" "${package}" in_depends)
  string(FIND "${recommends}" "${package}" in_recommends)
  if(NOT in_depends EQUAL -1)
    message(FATAL_ERROR "the package depends on ${package}, which only the ${component} component needs")
  endif()
  if(component IN_LIST components AND in_recommends EQUAL -1)
    message(FATAL_ERROR "the package has the ${component} component but does not recommend ${package}")
  endif()
  if(NOT component IN_LIST components AND NOT in_recommends EQUAL -1)
    message(FATAL_ERROR "the package recommends ${package} without the ${component} component that needs it")
  endif()
endforeach()
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

build_and_run_consumer(${WORK_DIR}/root/usr -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
# The programs ship too and run from the unpacked tree.
run(${WORK_DIR}/root/usr/bin/wandura --version)
