#pragma once
// LoRA: low-rank adapters on the decoder's projections (Hu et al. 2021, as PyPI peft computes them).
//
// add_lora gives each chosen Linear two small matrices, A [rank, in] and B [out, rank], and freezes
// everything else; the Linear then computes W x + b + (alpha / rank) * B A dropout(x) (nn/layers.h), so
// training updates only A and B. Names follow peft's (model.layers.0.self_attn.q_proj.lora_A.weight), so
// an adapter directory is a renaming away (interop/peft_adapter.h). On a family that fuses projections (GPT-2,
// GPT-NeoX, Phi-3) a target named by the family's fused module is one adapter on the fused matrix, as peft's. merge_lora folds B A into W and removes
// the adapters, leaving a plain decoder for the Hugging Face and GGUF exporters.
#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dew/nn/causal_transformer.h"

namespace dew::nn {

struct LoraConfig {
  std::int64_t rank = 0;  // 0 = no LoRA
  double alpha = 16;
  double dropout = 0;
  std::string modules = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";

  template <class V>
  void fields(V& v) {
    v("rank", rank, "rank of each adapter (A is [rank, in], B is [out, rank]); 0 = no LoRA, train every weight");
    v("alpha", alpha, "the adapter's output is scaled by alpha / rank");
    v("dropout", dropout, "dropout on the adapter's input while training, in [0, 1)");
    v("modules", modules,
      "comma-separated projections that get adapters: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, "
      "the model family's own module names (c_attn, query_key_value, qkv_proj, gate_up_proj: one adapter on the fused "
      "matrix, as peft's), and on mixture-of-experts layers experts.gate_up_proj, experts.down_proj (every expert's, stored grouped)");
  }

  // Errors name lora.<field> and the value. Whether the model has the named modules is add_lora's check
  // (a family's own names are known only with the model).
  void validate() const;
  bool enabled() const { return rank > 0; }
  // `modules` split at commas, spaces trimmed, in the order given.
  std::vector<std::string> module_names() const;
  double scale() const { return alpha / static_cast<double>(rank); }
};

// The projection names LoRA can adapt, in the decoder's order (gate_proj exists only with a gated MLP;
// experts.gate_up_proj and experts.down_proj, the grouped expert tensors, only in a mixture of experts, where
// each expert e gets its own A_e [rank, in] and B_e [out, rank], stored grouped as A [experts, rank, in] and
// B [experts, out, rank] under experts.lora_gate_up_proj / experts.lora_down_proj: peft's target_parameters).
const std::vector<std::string>& lora_module_choices();

// A module of one decoder layer under its family's own name, so lora.modules may name it as peft's
// target_modules would (interop/hf_lora_targets.h builds these from the family's tensor layout).
//   one part    a renaming: GPT-2's attn.c_proj is dew's self_attn.o_proj; it gets an adapter of its own
//   several     a matrix the family stores fused (GPT-2's attn.c_attn = q, k, v): it gets one adapter, as peft
//               puts one on the fused matrix: A [rank, in] shared by the parts and B [sum of outs, rank], of
//               whose rows part j computes with rows[j] (the family's layout of the fused matrix, so GPT-NeoX's
//               per-head interleave is respected). Its A and B live at <parent>.<leaf of name>.lora_A/B, e.g.
//               model.layers.0.self_attn.c_attn.lora_A.weight.
struct LoraTargetName {
  std::string name;                 // below the layer: attn.c_attn, attention.dense, self_attn.qkv_proj
  std::vector<std::string> parts;   // dew modules below the layer, in the fused matrix's order: self_attn.q_proj
  std::vector<std::vector<std::int64_t>> rows;  // several parts: part j's rows of the fused B, in order
};
using LoraTargetNames = std::vector<LoraTargetName>;

// Adds adapters to every decoder Linear whose last name is in config.module_names(): A drawn as peft draws it
// (kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in))) from a CPU generator seeded with
// `seed`, in sorted module-name order, so the values do not depend on the device; B zero, so the adapted
// model starts equal to the base. Both take W's dtype and device. Then every other parameter gets
// requires_grad(false). Call it after init_parameters or loading weights (init_parameters would redraw
// the adapters too). Returns the number of adapter parameters.
// Errors: a disabled or invalid config, a model that already has adapters, a module name the model lacks
// (the message lists those it has).
//
// A name in lora.modules is dew's (q_proj, ... : every layer's projection of that name, each its own adapter)
// or, with `names`, a family's (see LoraTargetName), matched as peft matches target_modules: a name equal
// to a module's path below the layer or ending it after a dot (c_proj names both of GPT-2's, attn.c_proj one).
// Errors also: a projection named twice (c_attn and q_proj on GPT-2).
std::int64_t add_lora(CausalTransformer& model, const LoraConfig& config, std::uint64_t seed, const LoraTargetNames& names = {});

// What add_lora would adapt, checked without touching the model (the same errors): a run checks its
// lora.modules with this before it writes anything.
void check_lora_modules(const CausalTransformer& model, const LoraConfig& config, const LoraTargetNames& names = {});

// W += scale * B A, computed in fp32 and cast to W's dtype; then the adapters are removed and every
// parameter is trainable again: a plain decoder, as if it had been trained with the update in W.
// Errors on a model without adapters.
void merge_lora(CausalTransformer& model);

// Removes the adapters without folding them in (the base model as it was) and makes every parameter
// trainable again. Does nothing on a model without adapters.
void remove_lora(CausalTransformer& model);

bool has_lora(const torch::nn::Module& module);

// While it lives, the model computes as its base (every adapter skipped), with no copy of the weights: a
// LoRA run's frozen reference for DPO and GRPO is the policy with its adapters off, as peft's
// disable_adapter() does.
class AdaptersOff {
 public:
  explicit AdaptersOff(CausalTransformer& model);
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;

 private:
  std::vector<std::shared_ptr<LinearImpl>> adapted_;
  std::vector<std::shared_ptr<ExpertsImpl>> experts_;
};

// The adapter parameters (names ending in .lora_A.weight / .lora_B.weight), keyed as parameter_map keys them.
std::map<std::string, at::Tensor> lora_parameters(const torch::nn::Module& module);

}  // namespace dew::nn
