// The portable kernels: what every instruction set's kernels must agree with (quantized_matrix.h states
// the bound). The per-block terms are the same integers and the same float products as the SIMD kernels';
// only the order in which the floats are added differs.
#include "dew/nn/kernels/quant_dot.h"

namespace dew::nn::kernels::quant {
namespace {

void dot_q8_0(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  const std::int64_t blocks = x.cols / 32;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    float acc = 0.0f;
    for (std::int64_t k = 0; k < blocks; ++k, b += 34) {
      const auto* qw = reinterpret_cast<const std::int8_t*>(b + 2);
      const std::int8_t* qx = x.q + 32 * k;
      std::int32_t isum = 0;
      for (int j = 0; j < 32; ++j) isum += static_cast<std::int32_t>(qw[j]) * qx[j];
      acc += (half_bits_to_float(load_u16(b)) * x.d[k]) * static_cast<float>(isum);
    }
    out[r] = acc;
  }
}

// Q4_0 and Q4_1 share the unsigned nibble product; `with_min` picks Q4_1 (d, m, nibbles) over Q4_0 (d, nibbles).
template <bool with_min>
void dot_q4(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  const std::int64_t blocks = x.cols / 32;
  constexpr int block_bytes = with_min ? 20 : 18, header = with_min ? 4 : 2;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    float acc = 0.0f, acc_offset = 0.0f;
    for (std::int64_t k = 0; k < blocks; ++k, b += block_bytes) {
      const std::uint8_t* qs = b + header;
      const std::int8_t* qx = x.q + 32 * k;
      std::int32_t isum = 0;
      for (int j = 0; j < 16; ++j) isum += (qs[j] & 0x0f) * qx[j] + (qs[j] >> 4) * qx[j + 16];
      const float d = half_bits_to_float(load_u16(b));
      acc += (d * x.d[k]) * static_cast<float>(isum);
      acc_offset += (with_min ? half_bits_to_float(load_u16(b + 2)) : d) * x.dsum[k];
    }
    out[r] = with_min ? acc + acc_offset : acc - 8.0f * acc_offset;
  }
}

void dot_q4_k(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  const std::int64_t blocks = x.cols / 256;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    float acc = 0.0f, acc_min = 0.0f;
    for (std::int64_t k = 0; k < blocks; ++k, b += 144) {
      const std::uint8_t* qs = b + 16;
      const std::int8_t* qx = x.q + 256 * k;
      std::int32_t isum = 0, msum = 0;
      for (int sub = 0; sub < 8; ++sub) {
        int scale, min;
        k_scale_min(b + 4, sub, scale, min);
        const std::uint8_t* q = qs + 32 * (sub / 2);
        const int shift = 4 * (sub % 2);
        std::int32_t s = 0;
        for (int l = 0; l < 32; ++l) s += ((q[l] >> shift) & 0x0f) * qx[32 * sub + l];
        isum += scale * s;
        msum += min * x.sub_sums[8 * k + sub];
      }
      acc += (half_bits_to_float(load_u16(b)) * x.d[k]) * static_cast<float>(isum);
      acc_min += (half_bits_to_float(load_u16(b + 2)) * x.d[k]) * static_cast<float>(msum);
    }
    out[r] = acc - acc_min;
  }
}

void dot_bf16(const std::uint8_t* w, std::int64_t row_bytes, std::int64_t n_rows, const ActRow& x, float* out) {
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const std::uint8_t* b = w + r * row_bytes;
    float acc = 0.0f;
    for (std::int64_t i = 0; i < x.cols; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(load_u16(b + 2 * i)) << 16;
      float v;
      __builtin_memcpy(&v, &bits, 4);
      acc += v * x.x[i];
    }
    out[r] = acc;
  }
}

}  // namespace

const KernelTable& scalar_kernels() {
  static const KernelTable table{"scalar", one_at_a_time<dot_q8_0>, one_at_a_time<dot_q4<false>>, one_at_a_time<dot_q4<true>>, one_at_a_time<dot_q4_k>, one_at_a_time<dot_bf16>};
  return table;
}

}  // namespace dew::nn::kernels::quant
