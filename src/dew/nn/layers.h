#pragma once
// The decoder's building blocks, named as Hugging Face's Llama/Qwen3 modules name them so that weight
// maps for published checkpoints are renamings, not translations.
//
// Parameters are stored in param_dtype; each forward casts them to the compute dtype at use, so bf16
// compute keeps fp32 master weights (the optimizer updates the fp32 copies).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <ATen/ATen.h>

#include "dew/nn/causal_transformer_config.h"

namespace dew::nn {

class QuantizedMatrix;  // nn/quantized/quantized_matrix.h

// y = x W^T (+ b) (+ residual), with W (and b) cast to x's dtype; the residual added as the product is
// written where cpu_linear_plus can (nn/cpu_matmul.h).
at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {}, const at::Tensor& residual = {});

// A Linear layer holding `weight` [out, in] and optionally `bias` [out].
//
// It may carry a low-rank adapter (LoRA, nn/lora.h adds, merges and removes it): submodules lora_A
// ([rank, in]) and lora_B ([out, rank]), named as peft names them, and then
//   forward(x) = dense(x, weight, bias) + lora_scale * dense(dense(dropout(x), A), B)
// with dropout only in training mode. Living inside Linear::forward, the adapter applies wherever the
// projection is used: training, evaluation and the KV-cache decode path alike.
//
// For inference the weight may instead be held `quantized` (GGUF blocks or bf16, nn/quantized/): then
// `weight` is an empty placeholder, forward multiplies with the quantized kernels in float32, and
// forward refuses training mode or inputs that require gradients (quantized weights have no gradient).
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(std::int64_t in, std::int64_t out, bool bias, c10::ScalarType param_dtype);
  at::Tensor forward(const at::Tensor& x) const;
  // residual + forward(x): a residual connection around this projection, added inside the product where it
  // can be (dense's residual); the adapter's delta, if any, then lands on the sum.
  at::Tensor forward_plus(const at::Tensor& x, const at::Tensor& residual) const;
  at::Tensor weight, bias;
  std::shared_ptr<const QuantizedMatrix> quantized;
  std::shared_ptr<LinearImpl> lora_A, lora_B;  // both or neither
  // Set when the adapter is one peft-style adapter on a matrix a family stores fused (GPT-2's c_attn, Phi-3's
  // qkv_proj; nn/lora.h): lora_A and lora_B then belong to that fused module, shared by its parts, and this
  // projection's output is lora_B's rows `lora_rows` (int64). Undefined: all of lora_B, the adapter being its own.
  at::Tensor lora_rows;
  double lora_scale = 0.0, lora_dropout = 0.0;
  bool lora_active = true;  // false: the adapter is skipped (the base model's output; AdaptersOff in lora.h)
};
TORCH_MODULE(Linear);

// RMSNorm computed in fp32 (as transformers does), result cast back to the input dtype. With a weight
// offset (Gemma's 1) it scales by (offset + weight) and casts after scaling, as Gemma's RMSNorm does.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(std::int64_t features, double eps, c10::ScalarType param_dtype, double weight_offset = 0.0);
  at::Tensor forward(const at::Tensor& x) const;
  at::Tensor weight;
  double eps, weight_offset;
};
TORCH_MODULE(RMSNorm);

// The decoder's block and final norms, per config.norm: RMSNorm (weight, with Gemma's offset) or LayerNorm with
// a weight and a bias (GPT-2, GPT-NeoX). LayerNorm computes in float32 and returns x's dtype, as RMSNorm does.
class NormImpl : public torch::nn::Module {
 public:
  NormImpl(std::int64_t features, const CausalTransformerConfig& config, c10::ScalarType param_dtype);
  at::Tensor forward(const at::Tensor& x) const;
  at::Tensor weight, bias;  // bias: layernorm only
  double eps, weight_offset;
};
TORCH_MODULE(Norm);

// Whether an MLP kind has a gate projection (swiglu, geglu) or is ungated (gelu, gelu_erf).
bool gated_mlp(const std::string& kind);

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype);
  at::Tensor forward(const at::Tensor& x) const;
  std::string kind;
  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

}  // namespace dew::nn
