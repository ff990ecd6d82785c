#include "fleet_route.hpp"

namespace demo {
namespace {

std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

} // namespace

std::uint32_t process_of_action(std::uint64_t seed, std::uint32_t viewer, std::size_t step,
                                std::uint32_t processes) noexcept {
  std::uint64_t const h = splitmix64(splitmix64(seed ^ 0x666c656574ULL) ^ (std::uint64_t{viewer} << 16U) ^ step);
  return static_cast<std::uint32_t>(h % processes);
}

} // namespace demo
