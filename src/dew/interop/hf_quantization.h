#pragma once
// config.json's quantization_config: the fp8 block-scaled layout is read (weights dequantized to the compute
// dtype at load, formats/fp8_blocks.h); every other method (GPTQ, AWQ, bitsandbytes, compressed-tensors, ...)
// is refused naming it and what to load instead.
#include <cstdint>
#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "dew/formats/safetensors_checkpoint.h"

namespace dew::interop {

// The finegrained fp8 format (the spec's fp8_format): E4M3 weights in square blocks. Its scales, float32 or
// bfloat16 (scale_fmt absent or "float") or ue8m0 powers of two (stored F8_E8M0 or as float32), multiply
// the same way, so only the block size is kept.
struct Fp8Quantization {
  std::int64_t block = 128;  // weight_block_size, both sides
};

// Nothing when config.json has no quantization_config; the fp8 format when it is quant_method fp8 in the
// form above; otherwise refused naming the field, the value and what to do. `source` names config.json.
std::optional<Fp8Quantization> read_quantization_config(const nlohmann::ordered_json& config, const std::string& source);

// Tensor `name` of the checkpoint as the model computes with it: an F8_E4M3 weight times its block scales
// (float32), anything else the stored view. Refused by name: an fp8 tensor in a checkpoint without the fp8
// quantization_config, an fp8 weight without `<name>_scale_inv`, a scale of the wrong shape, and fp8 formats
// other than E4M3 (E5M2 weights).
at::Tensor stored_weight(const formats::SafetensorsCheckpoint& weights, const std::string& name,
                         const std::optional<Fp8Quantization>& fp8);

}  // namespace dew::interop
