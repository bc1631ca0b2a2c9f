#pragma once
// Seeds for random streams that are pure functions of where a run is: a stream for one purpose (diffusion
// noise, GRPO rollouts, JEPA masks, ...) at (step, micro-batch), so a resumed run draws what the
// uninterrupted one drew with no generator state in its checkpoint, and purposes never share a stream.
#include <cstdint>

namespace dew {

// SplitMix64's finaliser (Steele, Lea and Flood 2014): a bijection that scrambles every input bit.
std::uint64_t splitmix64(std::uint64_t x);

// The seed of `purpose`'s stream at micro-batch `micro` of step `step` under the run's `seed`. `purpose` is
// an 8-character tag read as a number (e.g. "diffnois"), distinct per use.
std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t purpose, std::int64_t step, std::int64_t micro);

}  // namespace dew
