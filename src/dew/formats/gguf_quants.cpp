// ggml block layouts (ggml-common.h), decoded the way gguf-py's quants.py decodes them.
//
// Exactness: each output is computed with the same float32 operations as the reference, e.g. Q4_1 is
// (d * q) + m as two roundings. Products and sums are kept in separate statements so that no compiler
// contracts them into one fused multiply-add (GCC in ISO mode and Clang's default only fuse within one
// expression, and only on targets with FMA).
#include "dew/formats/gguf_quants.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "dew/core/error.h"
#include "dew/core/threads.h"

namespace dew::formats {
namespace {

constexpr int kQK = 256;  // QK_K: elements per K-quant super-block

std::uint16_t load16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

std::uint32_t load32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, nan (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else {
    // zero or subnormal: mantissa * 2^-24, exact in float
    bits = sign | std::bit_cast<std::uint32_t>(static_cast<float>(mantissa) * 5.9604644775390625e-08f);
  }
  return std::bit_cast<float>(bits);
}

// All 65,536 halves, decoded once: a table lookup beats the branches above in the F16 and scale paths.
const float* half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) t[i] = half_bits_to_float(static_cast<std::uint16_t>(i));
    return t;
  }();
  return table.data();
}

using Kernel = void (*)(const std::uint8_t* blocks, std::int64_t n_blocks, float* out, const float* half);

void dequant_f32(const std::uint8_t* b, std::int64_t n, float* out, const float*) { std::memcpy(out, b, n * 4); }
void dequant_f16(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = half[load16(b + 2 * i)];
}
void dequant_bf16(const std::uint8_t* b, std::int64_t n, float* out, const float*) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(load16(b + 2 * i)) << 16);
}
void dequant_f64(const std::uint8_t* b, std::int64_t n, float* out, const float*) {
  for (std::int64_t i = 0; i < n; ++i) {
    double v;
    std::memcpy(&v, b + 8 * i, 8);
    out[i] = static_cast<float>(v);
  }
}
void dequant_i8(const std::uint8_t* b, std::int64_t n, float* out, const float*) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<std::int8_t>(b[i]));
}
void dequant_i16(const std::uint8_t* b, std::int64_t n, float* out, const float*) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<std::int16_t>(load16(b + 2 * i)));
}
void dequant_i32(const std::uint8_t* b, std::int64_t n, float* out, const float*) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<std::int32_t>(load32(b + 4 * i)));
}

// Q4_0: half d, 16 bytes of nibbles; element j is the low nibble of byte j, element j+16 the high one.
void dequant_q4_0(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 18, out += 32) {
    const float d = half[load16(b)];
    const std::uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
      out[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

// Q4_1: half d, half m, nibbles as Q4_0; value d * q + m.
void dequant_q4_1(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 20, out += 32) {
    const float d = half[load16(b)], m = half[load16(b + 2)];
    const std::uint8_t* qs = b + 4;
    for (int j = 0; j < 16; ++j) {
      const float lo = d * static_cast<float>(qs[j] & 0x0f);
      const float hi = d * static_cast<float>(qs[j] >> 4);
      out[j] = lo + m;
      out[j + 16] = hi + m;
    }
  }
}

// Q5_0: half d, uint32 of fifth bits (bit j for element j), nibbles as Q4_0; value d * (q - 16).
void dequant_q5_0(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 22, out += 32) {
    const float d = half[load16(b)];
    const std::uint32_t qh = load32(b + 2);
    const std::uint8_t* qs = b + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      out[j] = d * static_cast<float>(lo - 16);
      out[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

// Q5_1: half d, half m, uint32 fifth bits, nibbles; value d * q + m.
void dequant_q5_1(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 24, out += 32) {
    const float d = half[load16(b)], m = half[load16(b + 2)];
    const std::uint32_t qh = load32(b + 4);
    const std::uint8_t* qs = b + 8;
    for (int j = 0; j < 16; ++j) {
      const unsigned lo = (qs[j] & 0x0fu) | (((qh >> j) & 1u) << 4);
      const unsigned hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
      const float plo = d * static_cast<float>(lo);
      const float phi = d * static_cast<float>(hi);
      out[j] = plo + m;
      out[j + 16] = phi + m;
    }
  }
}

// Q8_0: half d, 32 int8; value q * d.
void dequant_q8_0(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 34, out += 32) {
    const float d = half[load16(b)];
    for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
  }
}

// Q2_K: 16 bytes of 4-bit scale | 4-bit min per 16 elements, 64 bytes of 2-bit quants, half d, half dmin.
// Element 128*g + 32*s + l is bits 2s..2s+1 of quant byte 32*g + l.
void dequant_q2_k(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 84, out += kQK) {
    const std::uint8_t* scales = b;
    const std::uint8_t* qs = b + 16;
    const float d = half[load16(b + 80)], dmin = half[load16(b + 82)];
    for (int p = 0; p < kQK; ++p) {
      const int g = p / 128, s = (p / 32) % 4, l = p % 32;
      const std::uint8_t sc = scales[p / 16];
      const float dl = d * static_cast<float>(sc & 0x0f);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const float q = static_cast<float>((qs[32 * g + l] >> (2 * s)) & 3);
      const float prod = dl * q;
      out[p] = prod - ml;
    }
  }
}

// Q3_K: 32 bytes of high bits (element 32*b + l is bit b of byte l; a SET bit means no -4 offset),
// 64 bytes of 2-bit quants laid out as Q2_K's, 12 bytes of sixteen 6-bit scales (biased by 32), half d.
void dequant_q3_k(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 110, out += kQK) {
    const std::uint8_t* hmask = b;
    const std::uint8_t* qs = b + 32;
    const std::uint8_t* sc = b + 96;
    const float d = half[load16(b + 108)];
    float dl[16];
    for (int i = 0; i < 16; ++i) {
      const int low = (i < 8 ? sc[i] : sc[i - 8] >> 4) & 0x0f;
      const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
      dl[i] = d * static_cast<float>((low | (high << 4)) - 32);
    }
    for (int p = 0; p < kQK; ++p) {
      const int g = p / 128, s = (p / 32) % 4, l = p % 32;
      const int low = (qs[32 * g + l] >> (2 * s)) & 3;
      const int high_clear = ((hmask[l] >> (p / 32)) & 1) ^ 1;
      out[p] = dl[p / 16] * static_cast<float>(low - 4 * high_clear);
    }
  }
}

// Q4_K: half d, half dmin, 12 scale bytes, 128 bytes of nibbles; sub-block 2c (low nibbles of bytes
// 32c..32c+31) and 2c+1 (their high nibbles) of 32 elements each; value (d*scale) * q - (dmin*min).
void dequant_q4_k(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 144, out += kQK) {
    const float d = half[load16(b)], dmin = half[load16(b + 2)];
    const std::uint8_t* qs = b + 16;
    for (int sub = 0; sub < 8; ++sub) {
      int scale, min;
      k_scale_min(b + 4, sub, scale, min);
      const float ds = d * static_cast<float>(scale);
      const float dm = dmin * static_cast<float>(min);
      const std::uint8_t* q = qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      float* o = out + 32 * sub;
      for (int l = 0; l < 32; ++l) {
        const float prod = ds * static_cast<float>((q[l] >> shift) & 0x0f);
        o[l] = prod - dm;
      }
    }
  }
}

// Q5_K: Q4_K plus 32 bytes of fifth bits (element 32*b + l is bit b of byte l) before the nibbles.
void dequant_q5_k(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 176, out += kQK) {
    const float d = half[load16(b)], dmin = half[load16(b + 2)];
    const std::uint8_t* qh = b + 16;
    const std::uint8_t* qs = b + 48;
    for (int sub = 0; sub < 8; ++sub) {
      int scale, min;
      k_scale_min(b + 4, sub, scale, min);
      const float ds = d * static_cast<float>(scale);
      const float dm = dmin * static_cast<float>(min);
      const std::uint8_t* q = qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      float* o = out + 32 * sub;
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0x0f) | (((qh[l] >> sub) & 1) << 4);
        const float prod = ds * static_cast<float>(v);
        o[l] = prod - dm;
      }
    }
  }
}

// Q6_K: 128 bytes of low nibbles (element 128g + 64h + m is nibble h of byte 64g + m), 64 bytes of 2-bit
// high parts (element 128g + 32s + l is bits 2s..2s+1 of byte 32g + l), 16 int8 scales, half d;
// value (d * scale) * (q - 32).
void dequant_q6_k(const std::uint8_t* b, std::int64_t n, float* out, const float* half) {
  for (std::int64_t k = 0; k < n; ++k, b += 210, out += kQK) {
    const std::uint8_t* ql = b;
    const std::uint8_t* qh = b + 128;
    const std::uint8_t* sc = b + 192;
    const float d = half[load16(b + 208)];
    float ds[16];
    for (int i = 0; i < 16; ++i) ds[i] = d * static_cast<float>(static_cast<std::int8_t>(sc[i]));
    for (int p = 0; p < kQK; ++p) {
      const int g = p / 128, h = (p / 64) % 2, m = p % 64, s = (p / 32) % 4, l = p % 32;
      const int low = (ql[64 * g + m] >> (4 * h)) & 0x0f;
      const int high = (qh[32 * g + l] >> (2 * s)) & 3;
      out[p] = ds[p / 16] * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

Kernel kernel_for(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return dequant_f32;
    case GgmlType::F16: return dequant_f16;
    case GgmlType::BF16: return dequant_bf16;
    case GgmlType::F64: return dequant_f64;
    case GgmlType::I8: return dequant_i8;
    case GgmlType::I16: return dequant_i16;
    case GgmlType::I32: return dequant_i32;
    case GgmlType::Q4_0: return dequant_q4_0;
    case GgmlType::Q4_1: return dequant_q4_1;
    case GgmlType::Q5_0: return dequant_q5_0;
    case GgmlType::Q5_1: return dequant_q5_1;
    case GgmlType::Q8_0: return dequant_q8_0;
    case GgmlType::Q2_K: return dequant_q2_k;
    case GgmlType::Q3_K: return dequant_q3_k;
    case GgmlType::Q4_K: return dequant_q4_k;
    case GgmlType::Q5_K: return dequant_q5_k;
    case GgmlType::Q6_K: return dequant_q6_k;
    default: break;
  }
  dew::fail("dew cannot dequantize ggml type ", ggml_type_name(type), " (", static_cast<std::uint32_t>(type),
            "); it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K");
}

std::int64_t whole_blocks(GgmlType type, std::int64_t count) {
  const auto block = ggml_block_size(type);
  if (count < 0 || count % block != 0) {
    dew::fail(count, " elements of ", ggml_type_name(type), " are not whole blocks of ", block);
  }
  return count / block;
}

// gguf-py's np_roundf: halves round away from zero, as roundf does.
float round_away(float x) { return std::round(x); }

}  // namespace

float half_to_float(std::uint16_t h) { return half_bits_to_float(h); }

std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or nan; a nan keeps a nonzero payload, as numpy does
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    std::uint16_t payload = static_cast<std::uint16_t>((ax & 0x7fffffu) >> 13);
    return sign | 0x7c00u | (payload ? payload : 1u);
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (ax <= 0x33000000u) return sign;            // <= 2^-25 rounds to zero (2^-25 is a tie, to even)
  if (ax < 0x38800000u) {                        // a half subnormal: units of 2^-24
    const std::uint32_t e = ax >> 23;
    const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;
    std::uint32_t h = m >> shift;
    const std::uint32_t rest = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return sign | static_cast<std::uint16_t>(h);
  }
  std::uint32_t h = (ax >> 13) - (112u << 10);  // rebias the exponent from 127 to 15
  const std::uint32_t rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
  return sign | static_cast<std::uint16_t>(h);
}

void dequantize_row(GgmlType type, const std::uint8_t* blocks, std::int64_t count, float* out) {
  const auto kernel = kernel_for(type);
  const auto n_blocks = whole_blocks(type, count);
  // Plain types: a "block" is one element, and the kernels take element counts.
  kernel(blocks, n_blocks, out, half_table());
}

void dequantize(GgmlType type, std::span<const std::uint8_t> bytes, std::int64_t count, float* out, int threads) {
  const auto kernel = kernel_for(type);
  const auto n_blocks = whole_blocks(type, count);
  const auto block_bytes = ggml_block_bytes(type), block = ggml_block_size(type);
  if (static_cast<std::uint64_t>(n_blocks) * static_cast<std::uint64_t>(block_bytes) != bytes.size()) {
    dew::fail(count, " elements of ", ggml_type_name(type), " take ", n_blocks * block_bytes, " bytes, not ",
              bytes.size());
  }
  const float* half = half_table();
  // Chunks of about 1 MiB of output: large enough to amortise scheduling, small enough to balance.
  const std::int64_t chunk_blocks = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / block);
  const auto chunks = static_cast<std::size_t>((n_blocks + chunk_blocks - 1) / chunk_blocks);
  dew::parallel_for(chunks, chunks > 1 ? threads : 1, [&](std::size_t c) {
    const std::int64_t first = static_cast<std::int64_t>(c) * chunk_blocks;
    const std::int64_t n = std::min(chunk_blocks, n_blocks - first);
    kernel(bytes.data() + first * block_bytes, n, out + first * block, half);
  });
}

void quantize_row(GgmlType type, const float* values, std::int64_t count, std::uint8_t* out) {
  const auto n_blocks = whole_blocks(type, count);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out, values, static_cast<std::size_t>(count) * 4);
      return;
    case GgmlType::F16:
      for (std::int64_t i = 0; i < count; ++i) {
        const std::uint16_t h = float_to_half(values[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      // ggml_compute_fp32_to_bf16: nan made quiet, otherwise round to nearest even.
      for (std::int64_t i = 0; i < count; ++i) {
        const std::uint32_t x = std::bit_cast<std::uint32_t>(values[i]);
        std::uint16_t h;
        if ((x & 0x7fffffffu) > 0x7f800000u) {
          h = static_cast<std::uint16_t>((x >> 16) | 64u);
        } else {
          h = static_cast<std::uint16_t>((static_cast<std::uint64_t>(x) + 0x7fffu + ((x >> 16) & 1u)) >> 16);
        }
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q8_0:
      // d = max|x| / 127, q = round_away(x * (1 / d)), all in float32, as ggml's quantize_row_q8_0_ref.
      for (std::int64_t k = 0; k < n_blocks; ++k, values += 32, out += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[j]));
        const float d = amax / 127.0f;
        const float id = d == 0.0f ? 0.0f : 1.0f / d;
        const std::uint16_t dh = float_to_half(d);
        std::memcpy(out, &dh, 2);
        for (int j = 0; j < 32; ++j) {
          const float scaled = values[j] * id;
          out[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(round_away(scaled)));
        }
      }
      return;
    default:
      break;
  }
  dew::fail("dew cannot quantize to ggml type ", ggml_type_name(type), "; it writes F32, F16, BF16 and Q8_0");
}

}  // namespace dew::formats
