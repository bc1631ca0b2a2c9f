// AVX2 + FMA + F16C kernels (x86-64-v3), compiled with DEW_TARGET_AVX2 so the rest of the binary stays
// baseline x86-64; quantized_matrix.cpp calls them only when cpu_isa() is avx2 or more (cpu_isa.h).
// The integer products are those of the scalar kernels (maddubs pairs cannot saturate: |w| <= 128 after
// the sign trick or <= 15 for nibbles, |q_x| <= 127, so a pair is at most 2 * 128 * 127 = 32512).
#include "dew/nn/kernels/quant_dot.h"

#include "dew/nn/kernels/cpu_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace dew::nn::kernels::quant {
namespace {

DEW_TARGET_AVX2 inline float half_f16c(const std::uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

DEW_TARGET_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 bytes of nibbles -> 32 bytes: elements 0..15 (low nibbles) then 16..31 (high nibbles), ggml's order.
DEW_TARGET_AVX2 inline __m256i nibbles(const std::uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
}

// Unsigned bytes times signed bytes, summed in fours -> 8 int32.
DEW_TARGET_AVX2 inline __m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

DEW_TARGET_AVX2 void dot_q8_0(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  const std::int64_t blocks = x.cols / 32;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (std::int64_t k = 0; k < blocks; ++k, b += 34) {
      const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
      const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 32 * k));
      // |w| * (x with w's sign) = w * x, with the unsigned operand first as maddubs wants.
      const __m256i p = dot_u8_s8(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(half_f16c(b) * x.d[k]), acc);
    }
    out[r] = hsum(acc);
  }
}

template <bool with_min>
DEW_TARGET_AVX2 void dot_q4(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  const std::int64_t blocks = x.cols / 32;
  constexpr int block_bytes = with_min ? 20 : 18, header = with_min ? 4 : 2;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m256 acc = _mm256_setzero_ps();
    float acc_offset = 0.0f;
    for (std::int64_t k = 0; k < blocks; ++k, b += block_bytes) {
      const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 32 * k));
      const __m256i p = dot_u8_s8(nibbles(b + header), qx);
      const float d = half_f16c(b);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * x.d[k]), acc);
      acc_offset += (with_min ? half_f16c(b + 2) : d) * x.dsum[k];
    }
    out[r] = with_min ? hsum(acc) + acc_offset : hsum(acc) - 8.0f * acc_offset;
  }
}

DEW_TARGET_AVX2 void dot_q4_k(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  const std::int64_t blocks = x.cols / 256;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m256 acc = _mm256_setzero_ps();
    float acc_min = 0.0f;
    for (std::int64_t k = 0; k < blocks; ++k, b += 144) {
      int scale[8], min[8];
      for (int sub = 0; sub < 8; ++sub) k_scale_min(b + 4, sub, scale[sub], min[sub]);
      const std::int8_t* qx = x.q + 256 * k;
      __m256i isum = _mm256_setzero_si256();
      for (int g = 0; g < 4; ++g) {
        const __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * g));
        const __m256i lo = _mm256_and_si256(t, m4), hi = _mm256_and_si256(_mm256_srli_epi16(t, 4), m4);
        const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx + 64 * g));
        const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qx + 64 * g + 32));
        // The sub-block's scale multiplies the int16 pair sums (|pair| <= 2 * 15 * 127; times 63 fits int32).
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x_lo),
                                                        _mm256_set1_epi16(static_cast<short>(scale[2 * g]))));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x_hi),
                                                        _mm256_set1_epi16(static_cast<short>(scale[2 * g + 1]))));
      }
      std::int32_t msum = 0;
      for (int sub = 0; sub < 8; ++sub) msum += min[sub] * x.sub_sums[8 * k + sub];
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(half_f16c(b) * x.d[k]), acc);
      acc_min += (half_f16c(b + 2) * x.d[k]) * static_cast<float>(msum);
    }
    out[r] = hsum(acc) - acc_min;
  }
}

DEW_TARGET_AVX2 void dot_bf16(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    std::int64_t i = 0;
    for (; i + 16 <= x.cols; i += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2 * i));
      const __m256 w0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16));
      const __m256 w1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16));
      acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x.x + i), acc0);
      acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x.x + i + 8), acc1);
    }
    float tail = 0.0f;
    for (; i < x.cols; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(load_u16(b + 2 * i)) << 16;
      float v;
      __builtin_memcpy(&v, &bits, 4);
      tail += v * x.x[i];
    }
    out[r] = hsum(_mm256_add_ps(acc0, acc1)) + tail;
  }
}

}  // namespace

const KernelTable* avx2_kernels() {
  static const KernelTable table{"avx2", one_at_a_time<dot_q8_0>, one_at_a_time<dot_q4<false>>, one_at_a_time<dot_q4<true>>, one_at_a_time<dot_q4_k>, one_at_a_time<dot_bf16>};
  return &table;
}

}  // namespace dew::nn::kernels::quant

#else
namespace dew::nn::kernels::quant {
const KernelTable* avx2_kernels() { return nullptr; }
}  // namespace dew::nn::kernels::quant
#endif
