include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS wandura EXPORT wandura-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Public headers only: detail/ ships because public headers include it; testing/ ships for users' own tests.
install(DIRECTORY include/wandura DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT wandura-targets NAMESPACE wandura:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)

configure_package_config_file(cmake/wandura-config.cmake.in
  ${PROJECT_BINARY_DIR}/wandura-config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wandura-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wandura-config.cmake ${PROJECT_BINARY_DIR}/wandura-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
if(WANDURA_BUILD_EMULATOR) # wandura-config.cmake finds the emulator's libhttp-parser with it
  install(FILES cmake/Findhttp_parser.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/wandura)
endif()

configure_file(cmake/wandura.pc.in ${PROJECT_BINARY_DIR}/wandura.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wandura.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cpack -G DEB` in the build tree: one Debian package with the libraries, headers, CMake and pkg-config files and
# the `wandura` and `wandura-emulator` programs, installed under /usr. The libraries are static, so the package
# depends on the development packages of what they link; dpkg-shlibdeps adds the programs' shared libraries.
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
if(WANDURA_BUILD_EMULATOR)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libhttp-parser-dev")
endif()
set(CPACK_GENERATOR DEB)
include(CPack)
