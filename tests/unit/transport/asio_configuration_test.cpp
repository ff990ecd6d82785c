// Asio comes first in this file, before any standard header: where Asio 1.22 alone cannot see whether the standard
// library has std::aligned_alloc, and would pick another allocator for its per-thread recycling cache than files
// that include a standard header first. The build fixes the choice for every file (cmake/WanduraDependencies.cmake):
// blocks move between files through that cache, and one freed with the other allocator's function is undefined
// behaviour.
#include <asio/detail/config.hpp>

// (kept apart: the include above must stay first)
#include <catch2/catch.hpp>

TEST_CASE("asio configuration: the allocator of Asio's recycling cache is set by the build, not by include order") {
#if defined(ASIO_HAS_STD_ALIGNED_ALLOC) || defined(ASIO_DISABLE_STD_ALIGNED_ALLOC)
  SUCCEED("decided by the build's definitions");
#else
  FAIL("Asio decided its allocator from this file's include order");
#endif
}
