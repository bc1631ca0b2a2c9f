#pragma once
// A float exp that GCC vectorises (no libm call, no branches once trapping math is off, as it is for
// nn/kernels): the fused activation and attention kernels' softmax and sigmoid. Relative error ~1e-7, as expf.
#include <cstdint>

namespace dew::nn::kernels {

// exp(x) for x clamped to [-87, 88] (so 2^n stays a normal float): x = n ln2 + r with |r| <= ln2/2 (Cody-Waite:
// ln2 split in a 9-bit head, exact times n, and a tail), e^r by its Taylor polynomial to r^7 (truncation
// <= 0.347^8 / 8! ~ 5e-9 relative), and 2^n built in the exponent bits.
inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

}  // namespace dew::nn::kernels
