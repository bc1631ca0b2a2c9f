#pragma once
// Sixteen floats as a GCC vector, the unit of nn/kernels' float loops: one AVX-512 register, two AVX2 ones
// (GCC splits the operations in each copy, see cpu_isa.h), eight SSE ones. Sums kept in Lanes vectorise;
// sixteen scalar partial sums in arrays do not reliably (GCC turned two interleaved ones into shuffles and
// stack spills in the norms' backward, at a third of ATen's speed).
#include <cmath>
#include <cstdint>

// Unaligned moves of one Lanes from or to float memory.
#define DEW_LANES_LOAD(p) ({ ::dew::nn::kernels::Lanes lanes_; __builtin_memcpy(&lanes_, (p), sizeof lanes_); lanes_; })
#define DEW_LANES_STORE(p, v) __builtin_memcpy((p), &(v), sizeof(::dew::nn::kernels::Lanes))

namespace dew::nn::kernels {

constexpr std::int64_t kLanes = 16;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// A row's mean and 1 / sqrt(variance + eps) over its D floats, in two passes (the mean, then the centred sum
// of squares), as LibTorch's CPU layer norm takes them for rows this short: the LayerNorms' statistics.
__attribute__((always_inline)) inline void row_mean_rstd(const float* x, std::int64_t D, float eps, float& mean, float& rstd) {
  const std::int64_t body = D - D % kLanes;
  Lanes sums = {};
  for (std::int64_t d = 0; d < body; d += kLanes) sums += DEW_LANES_LOAD(x + d);
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += sums[l];
  for (std::int64_t d = body; d < D; ++d) sum += x[d];
  mean = sum / static_cast<float>(D);
  Lanes squares = {};
  for (std::int64_t d = 0; d < body; d += kLanes) {
    const Lanes c = DEW_LANES_LOAD(x + d) - mean;
    squares += c * c;
  }
  float sq = 0;
  for (int l = 0; l < kLanes; ++l) sq += squares[l];
  for (std::int64_t d = body; d < D; ++d) sq += (x[d] - mean) * (x[d] - mean);
  rstd = 1.0f / std::sqrt(sq / static_cast<float>(D) + eps);
}

}  // namespace dew::nn::kernels
