#include "dew/nn/mixture_of_experts.h"

#include <vector>

#include "dew/nn/activations.h"

namespace dew::nn {

ExpertsImpl::ExpertsImpl(std::int64_t experts, std::int64_t features, std::int64_t hidden, const std::string& kind,
                         c10::ScalarType param_dtype)
    : kind_(kind) {
  const auto options = at::TensorOptions().dtype(param_dtype);
  gate_up_proj = register_parameter("gate_up_proj", at::empty({experts, 2 * features, hidden}, options));
  down_proj = register_parameter("down_proj", at::empty({experts, hidden, features}, options));
}

namespace {
// x W_e^T, plus the adapter's scale * (x A_e^T) B_e^T when there is one.
at::Tensor product(const at::Tensor& x, const at::Tensor& grouped, const ExpertAdapter& lora, bool active, std::int64_t e) {
  auto y = dense(x, grouped.select(0, e));
  if (!lora || !active) return y;
  return y + dense(dense(x, lora->lora_A->weight.select(0, e)), lora->lora_B->weight.select(0, e)) * lora->scale;
}
}  // namespace

at::Tensor ExpertsImpl::expert(std::int64_t e, const at::Tensor& x) const {
  const auto features = down_proj.size(2);
  auto h = product(x, gate_up_proj, gate_up_lora, lora_active, e);
  auto gate = h.narrow(-1, 0, features), up = h.narrow(-1, features, features);
  auto act = kind_ == "geglu" ? geglu(gate, up) : swiglu(gate, up);
  return product(act, down_proj, down_lora, lora_active, e);
}

at::Tensor ExpertsImpl::forward(const at::Tensor& x, const at::Tensor& chosen, const at::Tensor& weights) const {
  const auto k = chosen.size(1), experts = num_experts();
  // Token copies sorted by expert (stable: each expert's tokens stay in token order), so each expert's
  // tokens are one contiguous block of the gathered input.
  const auto flat = chosen.reshape(-1);
  const auto order = std::get<1>(at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const auto tokens = at::div(order, k, "floor");
  const auto counts = at::bincount(flat, {}, experts).to(at::kCPU);
  const auto gathered = x.index_select(0, tokens);
  std::vector<at::Tensor> outputs;
  std::int64_t offset = 0;
  const auto* count = counts.data_ptr<std::int64_t>();
  for (std::int64_t e = 0; e < experts; ++e) {
    if (count[e] == 0) continue;
    outputs.push_back(expert(e, gathered.narrow(0, offset, count[e])));
    offset += count[e];
  }
  auto y = at::cat(outputs, 0) * weights.reshape(-1).index_select(0, order).unsqueeze(1).to(x.scalar_type());
  // Each token's copies summed into its row, in expert order, as transformers' index_add_ loop sums them.
  return at::zeros_like(x).index_add(0, tokens, y);
}

MixtureOfExpertsImpl::MixtureOfExpertsImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype)
    : top_k_(config.experts_per_token), norm_topk_prob_(config.norm_topk_prob) {
  const auto e = config.emb_features;
  gate = register_module("gate", Linear(e, config.num_experts, false, param_dtype));
  experts = register_module("experts", Experts(config.num_experts, config.resolved_expert_features(), e, config.mlp, param_dtype));
  if (config.shared_expert_features > 0) {
    CausalTransformerConfig shared = config;
    shared.mlp_features = config.shared_expert_features;
    shared_expert = register_module("shared_expert", Mlp(shared, param_dtype));
    shared_expert_gate = register_module("shared_expert_gate", Linear(e, 1, false, param_dtype));
  }
}

at::Tensor MixtureOfExpertsImpl::forward(const at::Tensor& x) {
  const auto rows = x.reshape({-1, x.size(-1)});
  // transformers: the router's logits in the compute dtype, its softmax and top-k in float32.
  const auto logits = gate->forward(rows).to(at::kFloat);
  const auto probabilities = at::softmax(logits, -1);
  auto [top, chosen] = at::topk(probabilities, top_k_, -1);
  if (norm_topk_prob_) top = top / top.sum(-1, /*keepdim=*/true);
  record_ = {logits, chosen};
  auto y = experts->forward(rows, chosen, top);
  if (shared_expert) y = y + at::sigmoid(shared_expert_gate->forward(rows)) * shared_expert->forward(rows);
  return y.view(x.sizes());
}

RouterRecord MixtureOfExpertsImpl::take_record() { return std::exchange(record_, RouterRecord{}); }

}  // namespace dew::nn
