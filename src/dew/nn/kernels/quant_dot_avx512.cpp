// AVX-512 kernels with VNNI's vpdpbusd (unsigned bytes x signed bytes, summed in fours into int32),
// compiled with DEW_TARGET_AVX512_VNNI; used only when cpu_isa() is avx512 and the CPU has VNNI
// (cpu_isa.h). Two 32-element blocks per 512-bit step. Same per-block integers as the scalar kernels:
//   Q4_0/Q4_1: nibbles (0..15) x q_x; the activation's block pairs are pre-arranged (ActRow::q_pair) to
//     match the nibble order one 256-bit load + shift gives: [a 0..15, b 0..15, a 16..31, b 16..31];
//   Q8_0: signed x signed, as (q_x + 128) x w - 128 * sum(w), both sums by vpdpbusd (exact in int32);
//   Q4_K: each 32-element sub-block's int32 sum times its 6-bit scale, summed in int32.
#include "dew/nn/kernels/quant_dot.h"

#include "dew/nn/kernels/cpu_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12's avx512fintrin.h leaves the upper half of casts (_mm512_castsi256_si512) undefined on purpose
// and then warns about it at -O3.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace dew::nn::kernels::quant {
namespace {

DEW_TARGET_AVX512_VNNI inline float half_f16c(const std::uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

// Two halves (one from each block) -> [h_a, h_b, 0, 0] as floats.
DEW_TARGET_AVX512_VNNI inline __m128 two_halves(const std::uint8_t* a, const std::uint8_t* b) {
  const int packed = static_cast<int>(load_u16(a)) | (static_cast<int>(load_u16(b)) << 16);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(packed));
}

DEW_TARGET_AVX512_VNNI inline __m128 two_floats(const float* p) { return _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p))); }

DEW_TARGET_AVX512_VNNI inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// NX activation rows at once: each weight pair is loaded and unpacked once for all of them.
template <int NX>
DEW_TARGET_AVX512_VNNI void dot_q8_0_n(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow* x, float* out,
                           std::int64_t out_stride) {
  const std::int64_t blocks = x[0].cols / 32, pairs = blocks / 2;
  const __m512i ones = _mm512_set1_epi8(1);
  // Lanes 0..7 take block a's scale, 8..15 block b's.
  const __m512i spread = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m512 acc[NX];
    for (int a = 0; a < NX; ++a) acc[a] = _mm512_setzero_ps();
    for (std::int64_t p = 0; p < pairs; ++p, b += 68) {
      const __m512i qw = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 36)), 1);
      const __m512i wsum128 = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qw), 7);
      const __m128 d = two_halves(b, b + 34);
      for (int a = 0; a < NX; ++a) {
        const __m512i xb = _mm512_loadu_si512(x[a].q_biased + 64 * p);
        const __m512i isum = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xb, qw), wsum128);
        const __m128 scales = _mm_mul_ps(d, two_floats(x[a].d + 2 * p));
        acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(scales)), acc[a]);
      }
    }
    for (int a = 0; a < NX; ++a) {
      float total = _mm512_reduce_add_ps(acc[a]);
      if (blocks % 2) {  // the last block alone, 256 bits wide
        const std::int64_t k = blocks - 1;
        const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[a].q + 32 * k));
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
        total += hsum256(_mm256_cvtepi32_ps(p)) * (half_f16c(b) * x[a].d[k]);
      }
      out[a * out_stride + r] = total;
    }
  }
}

template <bool with_min, int NX>
DEW_TARGET_AVX512_VNNI void dot_q4_n(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow* x, float* out,
                         std::int64_t out_stride) {
  const std::int64_t blocks = x[0].cols / 32, pairs = blocks / 2;
  constexpr int block_bytes = with_min ? 20 : 18, header = with_min ? 4 : 2;
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  // vpdpbusd's lanes 0..3 and 8..11 hold block a, 4..7 and 12..15 block b.
  const __m512i spread = _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m512 acc[NX];
    __m128 acc_offset[NX];
    for (int a = 0; a < NX; ++a) {
      acc[a] = _mm512_setzero_ps();
      acc_offset[a] = _mm_setzero_ps();
    }
    for (std::int64_t p = 0; p < pairs; ++p, b += 2 * block_bytes) {
      const __m256i t = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + header))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + block_bytes + header)), 1);
      const __m512i qw = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1), m4);
      const __m128 d = two_halves(b, b + block_bytes);
      const __m128 offset = with_min ? two_halves(b + 2, b + block_bytes + 2) : d;
      for (int a = 0; a < NX; ++a) {
        const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qw, _mm512_loadu_si512(x[a].q_pair + 64 * p));
        const __m128 scales = _mm_mul_ps(d, two_floats(x[a].d + 2 * p));
        acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(scales)), acc[a]);
        acc_offset[a] = _mm_fmadd_ps(offset, two_floats(x[a].dsum + 2 * p), acc_offset[a]);
      }
    }
    for (int a = 0; a < NX; ++a) {
      float total = _mm512_reduce_add_ps(acc[a]);
      float offset_total = _mm_cvtss_f32(_mm_add_ss(acc_offset[a], _mm_movehdup_ps(acc_offset[a])));
      if (blocks % 2) {
        const std::int64_t k = blocks - 1;
        const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + header));
        const __m256i qw = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[a].q + 32 * k));
        const __m256i isum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), qw, qx);
        const float d = half_f16c(b);
        total += hsum256(_mm256_cvtepi32_ps(isum)) * (d * x[a].d[k]);
        offset_total += (with_min ? half_f16c(b + 2) : d) * x[a].dsum[k];
      }
      out[a * out_stride + r] = with_min ? total + offset_total : total - 8.0f * offset_total;
    }
  }
}

void dot_q8_0(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow* x, int n_x, float* out,
              std::int64_t out_stride) {
  switch (n_x) {
    case 1: return dot_q8_0_n<1>(w, row_bytes, n_rows, x, out, out_stride);
    case 2: return dot_q8_0_n<2>(w, row_bytes, n_rows, x, out, out_stride);
    case 3: return dot_q8_0_n<3>(w, row_bytes, n_rows, x, out, out_stride);
    default: return dot_q8_0_n<4>(w, row_bytes, n_rows, x, out, out_stride);
  }
}

template <bool with_min>
void dot_q4(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow* x, int n_x, float* out,
            std::int64_t out_stride) {
  switch (n_x) {
    case 1: return dot_q4_n<with_min, 1>(w, row_bytes, n_rows, x, out, out_stride);
    case 2: return dot_q4_n<with_min, 2>(w, row_bytes, n_rows, x, out, out_stride);
    case 3: return dot_q4_n<with_min, 3>(w, row_bytes, n_rows, x, out, out_stride);
    default: return dot_q4_n<with_min, 4>(w, row_bytes, n_rows, x, out, out_stride);
  }
}

DEW_TARGET_AVX512_VNNI void dot_q4_k(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  const std::int64_t blocks = x.cols / 256;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m512 acc = _mm512_setzero_ps();
    float acc_min = 0.0f;
    for (std::int64_t k = 0; k < blocks; ++k, b += 144) {
      int scale[8], min[8];
      for (int sub = 0; sub < 8; ++sub) k_scale_min(b + 4, sub, scale[sub], min[sub]);
      const std::int8_t* qx = x.q + 256 * k;
      __m512i isum = _mm512_setzero_si512();
      for (int g = 0; g < 4; ++g) {
        const __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * g));
        const __m512i qw = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(t, m4)),
                                              _mm256_and_si256(_mm256_srli_epi16(t, 4), m4), 1);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qw, _mm512_loadu_si512(qx + 64 * g));
        const __m512i sc = _mm512_inserti64x4(_mm512_set1_epi32(scale[2 * g]), _mm256_set1_epi32(scale[2 * g + 1]), 1);
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, sc));
      }
      std::int32_t msum = 0;
      for (int sub = 0; sub < 8; ++sub) msum += min[sub] * x.sub_sums[8 * k + sub];
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(half_f16c(b) * x.d[k]), acc);
      acc_min += (half_f16c(b + 2) * x.d[k]) * static_cast<float>(msum);
    }
    out[r] = _mm512_reduce_add_ps(acc) - acc_min;
  }
}

DEW_TARGET_AVX512_VNNI void dot_bf16(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    std::int64_t i = 0;
    for (; i + 32 <= x.cols; i += 32) {
      const __m512i h = _mm512_loadu_si512(b + 2 * i);
      // bf16 -> fp32 is a 16-bit shift: exact, so the products are fp32 products of the stored values.
      const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
      const __m512 w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
      acc0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x.x + i), acc0);
      acc1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x.x + i + 16), acc1);
    }
    float tail = 0.0f;
    for (; i < x.cols; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(load_u16(b + 2 * i)) << 16;
      float v;
      __builtin_memcpy(&v, &bits, 4);
      tail += v * x.x[i];
    }
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + tail;
  }
}

}  // namespace

const KernelTable* avx512_kernels() {
  static const KernelTable table{"avx512-vnni", dot_q8_0, dot_q4<false>, dot_q4<true>, one_at_a_time<dot_q4_k>,
                                 one_at_a_time<dot_bf16>};
  return &table;
}

}  // namespace dew::nn::kernels::quant

#else
namespace dew::nn::kernels::quant {
const KernelTable* avx512_kernels() { return nullptr; }
}  // namespace dew::nn::kernels::quant
#endif
