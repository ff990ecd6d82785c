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

