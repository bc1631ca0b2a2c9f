#pragma once
// Block-scaled float8 weights, the layout of DeepSeek-V3, Qwen3-FP8 and transformers' FineGrainedFP8
// (config.json quantization_config {"quant_method": "fp8", "weight_block_size": [B, B], ...}): a Linear
// weight [out, in] stored as F8_E4M3, beside it `<weight>_scale_inv` [ceil(out / B), ceil(in / B)], float32,
// bfloat16 or F8_E8M0 (a power of two, DeepSeek-V3.2's ue8m0 scales). The real weight is the fp8 value times
// its block's scale; the last block of a row or column may be partial.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace dew::formats {

// float32(weight[i, j]) * float32(scale_inv[i / block, j / block]), a float32 [out, in] tensor. Each element
// is one float32 product of two exactly converted values (every fp8, bf16 and e8m0 value is a float32), so
// the result is what torch computes the same way, bit for bit. `context` names the file and tensor: a
// weight that is not 2-D or a scale whose shape is not [ceil(out / block), ceil(in / block)] is refused.
at::Tensor dequantize_fp8_blocks(const at::Tensor& weight, const at::Tensor& scale_inv, std::int64_t block,
                                 const std::string& context);

}  // namespace dew::formats
