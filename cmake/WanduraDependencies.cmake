# Finds the Debian 12 packages the libraries need. Every dependency of an installed target is also listed, with the
# same names, in cmake/wandura-config.cmake.in so that consumers of the installed package find them again.
find_package(Threads REQUIRED)
find_package(CURL 7.88 REQUIRED)
find_package(OpenSSL 3.0 REQUIRED)
find_package(simdjson 3.0 REQUIRED CONFIG)
if(WANDURA_BUILD_EMULATOR)
  find_package(http_parser REQUIRED) # cmake/Findhttp_parser.cmake
endif()

# Build-only: the command lines (`wandura`, `wandura-emulator`, the demo) parse their arguments with CLI11
# (libcli11-dev, header-only). No installed header includes it, so the package config does not look for it.
find_package(CLI11 2.1 REQUIRED CONFIG)

# Standalone Asio (libasio-dev) ships headers only, without a CMake package.
find_path(WANDURA_ASIO_INCLUDE_DIR NAMES asio.hpp REQUIRED)
if(NOT TARGET wandura_asio)
  add_library(wandura_asio INTERFACE)
  target_include_directories(wandura_asio SYSTEM INTERFACE ${WANDURA_ASIO_INCLUDE_DIR})
  target_compile_definitions(wandura_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
  target_link_libraries(wandura_asio INTERFACE Threads::Threads)
endif()
