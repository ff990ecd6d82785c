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

# The Asio configuration every file of a program that uses the library must share, given to the library's targets,
# their consumers (PUBLIC) and the pkg-config files. Besides standalone Asio without its deprecated names: whether
# Asio's recycling allocator (coroutine frames, handlers) takes its blocks from std::aligned_alloc. Asio 1.22 reads
# that from the standard library's own macros, which exist only once some standard header has been included, so a
# file that includes Asio first decides "operator new" where every other decides "aligned_alloc". Blocks move
# between files through Asio's per-thread cache: one freed with the other's function is undefined behaviour (ASan's
# alloc-dealloc-mismatch; a crash with a replaced global operator new). The answer is fixed here, once, as Asio
# gives it after a standard header.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_INCLUDES ${WANDURA_ASIO_INCLUDE_DIR})
check_cxx_source_compiles([[
#include <cstdlib>
#include <asio/detail/config.hpp>
#if !defined(ASIO_HAS_STD_ALIGNED_ALLOC)
#error "no std::aligned_alloc for Asio"
#endif
int main() { return 0; }
]] WANDURA_ASIO_HAS_STD_ALIGNED_ALLOC)
unset(CMAKE_REQUIRED_INCLUDES)
set(WANDURA_ASIO_DEFINITIONS ASIO_STANDALONE ASIO_NO_DEPRECATED)
# C++20 coroutines, which every public header needs (`asio::awaitable`): Asio 1.22 finds them for GCC, but for clang
# looks only for the Coroutines TS (`__cpp_coroutines`, <experimental/coroutine>), which clang 16 with C++20 and
# libstdc++ does not offer: without these a clang user's `asio::awaitable` does not exist.
list(APPEND WANDURA_ASIO_DEFINITIONS ASIO_HAS_CO_AWAIT=1 ASIO_HAS_STD_COROUTINE=1)
if(WANDURA_ASIO_HAS_STD_ALIGNED_ALLOC)
  list(APPEND WANDURA_ASIO_DEFINITIONS ASIO_HAS_STD_ALIGNED_ALLOC=1)
else()
  list(APPEND WANDURA_ASIO_DEFINITIONS ASIO_DISABLE_STD_ALIGNED_ALLOC)
endif()
list(TRANSFORM WANDURA_ASIO_DEFINITIONS PREPEND "-D" OUTPUT_VARIABLE WANDURA_ASIO_CFLAGS)
list(JOIN WANDURA_ASIO_CFLAGS " " WANDURA_ASIO_CFLAGS) # for the .pc files

if(NOT TARGET wandura_asio)
  add_library(wandura_asio INTERFACE)
  target_include_directories(wandura_asio SYSTEM INTERFACE ${WANDURA_ASIO_INCLUDE_DIR})
  target_compile_definitions(wandura_asio INTERFACE ${WANDURA_ASIO_DEFINITIONS})
  target_link_libraries(wandura_asio INTERFACE Threads::Threads)
endif()
