#include "dew/core/stream_seed.h"

namespace dew {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t purpose, std::int64_t step, std::int64_t micro) {
  return splitmix64(splitmix64(splitmix64(seed ^ purpose) ^ static_cast<std::uint64_t>(step)) ^ static_cast<std::uint64_t>(micro));
}

}  // namespace dew
