#pragma once
// ggml's block formats to float32 and back, without LibTorch.
//
// Dequantization gives exactly the floats gguf-py's reference dequantizer (gguf/quants.py) gives: the same
// float32 operations in the same order (a scale times a quant, then minus or plus an offset, never fused).
// Quantization exists for what dew writes (F16, BF16, Q8_0) and matches gguf-py's quantize bit for bit.
#include <cstdint>
#include <span>

#include "dew/formats/gguf_file.h"

namespace dew::formats {

// IEEE half <-> float. float_to_half rounds to nearest even (numpy's astype(float16)).
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);

// Converts `count` elements (a multiple of the type's block size) stored as `type` at `blocks` to float32.
// Types: F32, F16, BF16, F64, I8, I16, I32, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K;
// others are refused by name.
void dequantize_row(GgmlType type, const std::uint8_t* blocks, std::int64_t count, float* out);

// The same over a whole tensor's bytes, split into chunks of blocks run on `threads` threads
// (0 = dew::available_threads()). Checks that `bytes` holds exactly `count` elements.
void dequantize(GgmlType type, std::span<const std::uint8_t> bytes, std::int64_t count, float* out, int threads = 0);

// Writes `count` floats as `type` (F32, F16, BF16 or Q8_0) to `out`, which holds
// count / ggml_block_size(type) * ggml_block_bytes(type) bytes.
void quantize_row(GgmlType type, const float* values, std::int64_t count, std::uint8_t* out);

// The 6-bit scale and minimum of sub-block i (0..7) of a Q4_K or Q5_K block, from its 12 scale bytes
// (ggml's get_scale_min_k4). Inline: the integer kernels (nn/kernels/quant_dot) call it in their inner loops.
inline void k_scale_min(const std::uint8_t* s, int i, int& scale, int& min) {
  if (i < 4) {
    scale = s[i] & 63;
    min = s[i + 4] & 63;
  } else {
    scale = (s[i + 4] & 0x0f) | ((s[i - 4] >> 6) << 4);
    min = (s[i + 4] >> 4) | ((s[i] >> 6) << 4);
  }
}

}  // namespace dew::formats
