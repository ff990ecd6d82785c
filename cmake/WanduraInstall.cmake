include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS wandura EXPORT wandura-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Public headers only: detail/ ships because public headers include it; testing/ ships for users' own tests.
install(DIRECTORY include/wandura DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT wandura-targets NAMESPACE wandura:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)

# The emulator and the optional layers, when they were built, are components of the package: each its own export
# file (wandura-<component>-targets.cmake, loaded by wandura-config.cmake after finding the component's dependencies)
# and its own pkg-config file (wandura-<component>.pc, which requires wandura.pc). Their headers ship with the rest.
# wandura::emulator links libhttp-parser, which has neither a CMake package nor a pkg-config file: the config finds
# it with the installed Findhttp_parser.cmake, and wandura-emulator.pc links it by name.
# wandura::fleet links hiredis: the config finds it with the installed Findhiredis.cmake, in the minor version the
# library was built against (before 1.0, hiredis changed its ABI with each minor version).
if(TARGET wandura_fleet)
  find_package(hiredis MODULE REQUIRED) # cmake/Findhiredis.cmake: the hiredis the fleet layer was built with
  math(EXPR hiredis_next_minor "${hiredis_VERSION_MINOR} + 1")
  set(WANDURA_HIREDIS_MIN_VERSION ${hiredis_VERSION_MAJOR}.${hiredis_VERSION_MINOR})
  set(WANDURA_HIREDIS_END_VERSION ${hiredis_VERSION_MAJOR}.${hiredis_next_minor})
  set(WANDURA_HIREDIS_VERSION_RANGE ${WANDURA_HIREDIS_MIN_VERSION}...<${WANDURA_HIREDIS_END_VERSION})
  install(FILES cmake/Findhiredis.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
endif()
if(TARGET wandura_emulator)
  install(FILES cmake/Findhttp_parser.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
endif()
foreach(component IN ITEMS emulator fleet prometheus)
  if(TARGET wandura_${component})
    install(EXPORT wandura-${component}-targets NAMESPACE wandura::
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
    configure_file(cmake/wandura-${component}.pc.in ${PROJECT_BINARY_DIR}/wandura-${component}.pc @ONLY)
    install(FILES ${PROJECT_BINARY_DIR}/wandura-${component}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  endif()
endforeach()

configure_package_config_file(cmake/wandura-config.cmake.in
  ${PROJECT_BINARY_DIR}/wandura-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wandura-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wandura-config.cmake ${PROJECT_BINARY_DIR}/wandura-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
configure_file(cmake/wandura.pc.in ${PROJECT_BINARY_DIR}/wandura.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wandura.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cpack -G DEB` in the build tree: one Debian package with the libraries, headers, CMake and pkg-config files and
# the `wandura` and `wandura-emulator` programs, installed under /usr. The libraries are static, so the package
# depends on the development packages of what they link; dpkg-shlibdeps adds the programs' shared libraries.
#
# The components' libraries (when built) are in the package too, but what they link is only recommended: a user of
# the core library must not have to install libhttp-parser's, Redis's or Prometheus's development files. (The
# programs link libhttp-parser's shared library, which dpkg-shlibdeps makes a dependency of its own.) apt installs
# Recommends by default, so a default install gets every component working; with --no-install-recommends the core
# still works, `find_package(wandura)` leaves the component out, and `find_package(wandura COMPONENTS fleet)` fails
# naming the missing package. (Depends would force them on every user; Suggests, which apt does not install,
# would leave libraries in the package that cannot link by default.)
set(CPACK_PACKAGE_NAME wandura-dev)
set(CPACK_PACKAGE_VENDOR wandura)
set(CPACK_PACKAGE_CONTACT "wandura-cpp maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libcurl4-openssl-dev (>= 7.88), libssl-dev (>= 3.0), libsimdjson-dev (>= 3.0), libasio-dev")
set(recommends "")
if(TARGET wandura_emulator)
  list(APPEND recommends "libhttp-parser-dev")
endif()
if(TARGET wandura_fleet)
  list(APPEND recommends
       "libhiredis-dev (>= ${WANDURA_HIREDIS_MIN_VERSION})" "libhiredis-dev (<< ${WANDURA_HIREDIS_END_VERSION})")
endif()
if(TARGET wandura_prometheus)
  list(APPEND recommends "prometheus-cpp-dev (>= 1.0)")
endif()
list(JOIN recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
set(CPACK_GENERATOR DEB)
include(CPack)
