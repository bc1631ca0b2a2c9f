#pragma once
// A model's weight matrices held as QuantizedMatrix for inference: the `--dtype` choice of the inference
// commands, and the module surgery that swaps a float parameter for a quantized matrix.
#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "dew/nn/quantized/quantized_matrix.h"

namespace dew::nn {

// How an inference command holds a checkpoint's weight matrices (`--dtype`):
//   native    as the file stores them: a GGUF's Q8_0/Q4_0/Q4_1/Q4_K/BF16 matrices stay in their blocks
//             (other GGUF types, and float checkpoints, are float32)
//   float32   everything dequantized to float32 (what training needs)
//   bfloat16  matrices (linear layers, token table) stored as bf16, computed in float32
enum class WeightFormat { native, float32, bfloat16 };
// "native", "float32", "bfloat16"; anything else is an error naming `field` and the choices.
WeightFormat parse_weight_format(const std::string& text, const std::string& field);
const char* weight_format_name(WeightFormat format);

// Makes `matrix` the weight of the Linear or Embedding of `root` that owns `parameter` (its dotted name,
// "model.layers.0.self_attn.q_proj.weight"), releasing the parameter's float storage (left as an empty
// tensor). The matrix's shape must be the parameter's.
void hold_quantized(torch::nn::Module& root, const std::string& parameter, std::shared_ptr<const QuantizedMatrix> matrix);
// Every Linear and Embedding weight of `root` still held as a float parameter, stored as `type`
// (QuantizedMatrix::from_float: BF16 or Q8_0). Returns how many matrices it converted.
std::int64_t quantize_matrices(torch::nn::Module& root, formats::GgmlType type);
// Bytes held by `root`'s quantized matrices (a matrix shared by two modules, a tied head, counted once).
std::int64_t quantized_bytes(torch::nn::Module& root);

}  // namespace dew::nn
