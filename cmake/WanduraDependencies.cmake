# Finds the Debian 12 packages the library needs. Every dependency here is also listed, with the same names, in
# cmake/wandura-config.cmake.in so that consumers of the installed package find them again.
find_package(Threads REQUIRED)
find_package(CURL 7.88 REQUIRED)
find_package(OpenSSL 3.0 REQUIRED)
find_package(simdjson 3.0 REQUIRED CONFIG)

# Standalone Asio (libasio-dev) ships headers only, without a CMake package.
find_path(WANDURA_ASIO_INCLUDE_DIR NAMES asio.hpp REQUIRED)
if(NOT TARGET wandura_asio)
  add_library(wandura_asio INTERFACE)
  target_include_directories(wandura_asio SYSTEM INTERFACE ${WANDURA_ASIO_INCLUDE_DIR})
  target_compile_definitions(wandura_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
  target_link_libraries(wandura_asio INTERFACE Threads::Threads)
endif()
