#pragma once
// The inner loops of nn/quantized/quantized_matrix.cpp: dot products of weight rows held as ggml blocks
// with one activation row, one table per instruction set (scalar, AVX2, AVX-512 VNNI), written with
// intrinsics under cpu_isa.h's target attributes and chosen from its cpu_isa().
//
// Activations are quantized once per row to 8-bit blocks, as llama.cpp's q8_0 / q8_K do:
//   32-element blocks (for Q8_0, Q4_0, Q4_1): q[i] = round(x[i] / d), d = max|x| / 127 over the block,
//     with dsum = d * sum(q) (Q4_0's -8 offset and Q4_1's minimum multiply the block's sum);
//   256-element blocks (for Q4_K): one d per 256, and the sum of q over each 32-element sub-block.
// The weight side's integer products are then exact (int8 x int8 -> int32), so every instruction set
// computes the same per-block integers; only the float accumulation order differs.
//
// Pure pointer code: no std templates (a template instantiated inside a target function is still built for
// the baseline, so the inner loops keep to their own functions).
#include <cstdint>

#include "dew/formats/gguf_quants.h"

namespace dew::nn::kernels::quant {

// One activation row in 8-bit blocks, structure of arrays. Sizes: q[cols], d[blocks], dsum[blocks] for
// 32-blocks; for 256-blocks d[blocks] and sub_sums[blocks * 8] (dsum unused).
struct ActRow {
  const std::int8_t* q;
  const std::uint8_t* q_biased;  // q + 128 as unsigned bytes (AVX-512 Q8_0)
  const std::int8_t* q_pair;      // per pair of 32-blocks a, b: [a 0..15, b 0..15, a 16..31, b 16..31] (AVX-512 Q4_x)
  const float* d;
  const float* dsum;
  const std::int32_t* sub_sums;
  const float* x;  // the float row itself (BF16 weights)
  std::int64_t cols;
};

// out[a * out_stride + r] = sum over the row of w[r] * x[a] for weight rows r in [0, n_rows) (each
// `row_bytes` apart) and activation rows a in [0, n_x), n_x <= kMaxActRows: several activation rows share
// each weight block's loads and unpacking (prefill, batched decode).
constexpr int kMaxActRows = 4;
using DotRows = void (*)(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow* x, int n_x,
                         float* out, std::int64_t out_stride);
// One activation row at a time; OneAtATime<f> makes a DotRows of it.
using DotRowsOne = void (*)(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out);
template <DotRowsOne f>
void one_at_a_time(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow* x, int n_x, float* out,
                   std::int64_t out_stride) {
  for (int a = 0; a < n_x; ++a) f(w, row_bytes, n_rows, x[a], out + a * out_stride);
}

struct KernelTable {
  const char* name;
  DotRows q8_0, q4_0, q4_1, q4_k, bf16;
};

const KernelTable& scalar_kernels();
const KernelTable* avx2_kernels();    // null when not compiled for x86-64
const KernelTable* avx512_kernels();  // AVX-512 F/BW/VL/DQ + VNNI (+ BF16 where present)

// The 6-bit scale and minimum of Q4_K sub-block i (0..7): the format's own helper.
using formats::k_scale_min;

// IEEE half -> float without a table (exact).
inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  __builtin_memcpy(&v, p, 2);
  return v;
}

}  // namespace dew::nn::kernels::quant
