#pragma once
// A mixture-of-experts feed-forward layer (Mixtral, Qwen2-MoE, Qwen3-MoE), named as transformers 5.24 names
// its modules in memory, so that checkpoints map by renaming (interop/hf_tensor_layout.h):
//   gate.weight                 [experts, E]          the router
//   experts.gate_up_proj        [experts, 2 F, E]     each expert's gate rows, then its up rows
//   experts.down_proj           [experts, E, F]
//   shared_expert.{gate,up,down}_proj.weight, shared_expert_gate.weight [1, E]   (shared_expert_features > 0)
//
// Each token's router probabilities are softmax(gate x) in float32; it goes to the experts_per_token most
// probable experts, whose outputs are summed weighted by those probabilities (renormalised to sum to 1 with
// norm_topk_prob). The shared expert, when there is one, adds sigmoid(shared_expert_gate x) * its MLP.
//
// The experts are stored grouped (3-D) and computed grouped: the token copies are sorted by expert, and each
// expert multiplies its contiguous block of tokens with its slice of the grouped weights: one product per
// expert that has tokens, not one per (token, expert) pair.
#include <cstdint>

#include "dew/nn/layers.h"

namespace dew::nn {

// A low-rank update of a grouped weight W [experts, out, in]: W_e + scale * B_e A_e, with A [experts, rank,
// in] and B [experts, out, rank] (peft's target_parameters LoRA on transformers' expert tensors, stored
// grouped). Submodules lora_A and lora_B hold `weight`, so the names end as every adapter's do.
class GroupedWeightImpl : public torch::nn::Module {
 public:
  explicit GroupedWeightImpl(at::Tensor value) { weight = register_parameter("weight", std::move(value)); }
  at::Tensor weight;
};
TORCH_MODULE(GroupedWeight);

class ExpertAdapterImpl : public torch::nn::Module {
 public:
  ExpertAdapterImpl(at::Tensor a, at::Tensor b, double scale_) : scale(scale_) {
    lora_A = register_module("lora_A", GroupedWeight(std::move(a)));
    lora_B = register_module("lora_B", GroupedWeight(std::move(b)));
  }
  GroupedWeight lora_A{nullptr}, lora_B{nullptr};
  double scale;
};
TORCH_MODULE(ExpertAdapter);

class ExpertsImpl : public torch::nn::Module {
 public:
  ExpertsImpl(std::int64_t experts, std::int64_t features, std::int64_t hidden, const std::string& kind, c10::ScalarType param_dtype);
  // x [tokens, E]; chosen [tokens, k] expert ids; weights [tokens, k]. Returns [tokens, E].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& chosen, const at::Tensor& weights) const;
  std::int64_t num_experts() const { return gate_up_proj.size(0); }
  at::Tensor gate_up_proj, down_proj;
  // Adapters on the grouped weights (nn/lora.h adds them as submodules lora_gate_up_proj / lora_down_proj).
  ExpertAdapter gate_up_lora{nullptr}, down_lora{nullptr};
  bool lora_active = true;

 private:
  at::Tensor expert(std::int64_t e, const at::Tensor& x) const;
  std::string kind_;
};
TORCH_MODULE(Experts);

// What one MoE layer's router decided in the last forward, for the training losses (nn/router_losses.h).
struct RouterRecord {
  at::Tensor logits;  // [tokens, experts] float32, differentiable
  at::Tensor chosen;  // [tokens, k] int64
};

class MixtureOfExpertsImpl : public torch::nn::Module {
 public:
  MixtureOfExpertsImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype);
  // x [..., E] in the compute dtype; records the router's decision (take_record()).
  at::Tensor forward(const at::Tensor& x);
  // The last forward's record, handed over (the layer keeps none, so no graph outlives the step).
  RouterRecord take_record();
  Linear gate{nullptr};
  Experts experts{nullptr};
  Mlp shared_expert{nullptr};
  Linear shared_expert_gate{nullptr};

 private:
  std::int64_t top_k_;
  bool norm_topk_prob_;
  RouterRecord record_;
};
TORCH_MODULE(MixtureOfExperts);

}  // namespace dew::nn
