#include "dew/nn/lora.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "dew/core/error.h"
#include "dew/nn/parameters.h"

namespace dew::nn {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string last_name(const std::string& path) {
  auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The decoder blocks' Linear layers by full name, sorted (std::map), so draws follow names, not registration.
// The output head is left out: the loss reads its matrix directly (token_cross_entropy), bypassing forward.
std::map<std::string, std::shared_ptr<LinearImpl>> decoder_linears(const torch::nn::Module& model) {
  std::map<std::string, std::shared_ptr<LinearImpl>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto linear = std::dynamic_pointer_cast<LinearImpl>(item.value());
    const auto& name = item.key();
    if (!linear || name.rfind("model.layers.", 0) != 0 || name.ends_with(".lora_A") || name.ends_with(".lora_B")) continue;
    out.emplace(name, linear);
  }
  return out;
}

// The mixture-of-experts layers' grouped experts by full name, sorted.
std::map<std::string, std::shared_ptr<ExpertsImpl>> decoder_experts(const torch::nn::Module& model) {
  std::map<std::string, std::shared_ptr<ExpertsImpl>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (auto experts = std::dynamic_pointer_cast<ExpertsImpl>(item.value())) out.emplace(item.key(), experts);
  }
  return out;
}

// The grouped expert tensors' LoRA choices, as peft's target_parameters names them.
constexpr const char* kExpertGateUp = "experts.gate_up_proj";
constexpr const char* kExpertDown = "experts.down_proj";

// A [experts, rank, in] drawn as peft draws its [rank * experts, in] (kaiming-uniform, bound 1/sqrt(in)),
// B [experts, out, rank] zero; registered on `experts` as `name`.
std::int64_t add_expert_adapter(ExpertsImpl& experts, const std::string& name, const at::Tensor& w, const LoraConfig& config,
                                at::Generator& generator) {
  const auto count = w.size(0), out = w.size(1), in = w.size(2);
  auto options = at::TensorOptions().dtype(w.scalar_type()).device(w.device());
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  auto a = at::empty({count, config.rank, in}, at::TensorOptions().dtype(at::kFloat)).uniform_(-bound, bound, generator).to(options);
  auto adapter = experts.register_module(name, ExpertAdapter(a, at::zeros({count, out, config.rank}, options), config.scale()));
  (name == "lora_gate_up_proj" ? experts.gate_up_lora : experts.down_lora) = adapter;
  return adapter->lora_A->weight.numel() + adapter->lora_B->weight.numel();
}

}  // namespace

const std::vector<std::string>& lora_module_choices() {
  static const std::vector<std::string> choices = {"q_proj",   "k_proj",  "v_proj",  "o_proj", "gate_proj",
                                                   "up_proj",  "down_proj", kExpertGateUp, kExpertDown};
  return choices;
}

std::vector<std::string> LoraConfig::module_names() const {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= modules.size()) {
    auto comma = modules.find(',', start);
    if (comma == std::string::npos) comma = modules.size();
    auto item = modules.substr(start, comma - start);
    auto first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    out.push_back(first == std::string::npos ? "" : item.substr(first, last - first + 1));
    start = comma + 1;
  }
  return out;
}

void LoraConfig::validate() const {
  if (rank < 0) dew::fail("lora.rank is ", rank, "; use a positive rank (8 or 16 are common), or 0 for no LoRA");
  if (!(alpha > 0) || std::isinf(alpha)) dew::fail("lora.alpha must be positive and finite, got ", alpha, " (the adapter is scaled by alpha / rank)");
  if (!(dropout >= 0 && dropout < 1)) dew::fail("lora.dropout must be in [0, 1), got ", dropout);
  const auto& choices = lora_module_choices();
  std::set<std::string> seen;
  for (const auto& name : module_names()) {
    if (name.empty()) dew::fail("lora.modules '", modules, "' has an empty name; list projections separated by single commas");
    if (std::find(choices.begin(), choices.end(), name) == choices.end()) {
      dew::fail("lora.modules names '", name, "', which is not a projection LoRA can adapt; choose from ", joined(choices),
                name == "lm_head" || name == "embed_tokens" ? " (the embedding and output head stay frozen)" : "");
    }
    if (!seen.insert(name).second) dew::fail("lora.modules names '", name, "' twice ('", modules, "'); list each once");
  }
}

std::int64_t add_lora(CausalTransformer& model, const LoraConfig& config, std::uint64_t seed) {
  config.validate();
  if (!config.enabled()) dew::fail("add_lora needs lora.rank > 0 (got ", config.rank, ")");
  if (has_lora(*model)) dew::fail("the model already has LoRA adapters; merge them (merge_lora) before adding new ones");
  auto linears = decoder_linears(*model);
  const auto experts = decoder_experts(*model);
  std::set<std::string> present;
  for (const auto& [name, linear] : linears) present.insert(last_name(name));
  if (!experts.empty()) present.insert({kExpertGateUp, kExpertDown});
  auto wanted = config.module_names();
  for (const auto& name : wanted) {
    if (!present.count(name)) {
      std::vector<std::string> have;
      for (const auto& choice : lora_module_choices()) {
        if (present.count(choice)) have.push_back(choice);
      }
      dew::fail("lora.modules names '", name, "', which this model does not have", name == "gate_proj" ? " (its MLP is not gated)" : "",
                name.starts_with("experts.") ? " (it has no mixture-of-experts layer)" : "", "; its projections are ", joined(have));
    }
    if (name.starts_with("experts.") && config.dropout > 0) {
      // The update is applied to the grouped weight, B A x for the whole expert: dropout on x alone cannot be
      // factored out of it (peft refuses it for target_parameters too).
      dew::fail("lora.dropout is ", config.dropout, " with lora.modules naming '", name, "'; adapters on the grouped experts take no dropout (set lora.dropout=0)");
    }
  }

  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::int64_t count = 0;
  for (auto& [name, linear] : linears) {
    if (std::find(wanted.begin(), wanted.end(), last_name(name)) == wanted.end()) continue;
    const auto& w = linear->weight;
    const auto out = w.size(0), in = w.size(1);
    auto options = at::TensorOptions().dtype(w.scalar_type()).device(w.device());
    // peft: kaiming_uniform_(A, a=sqrt(5)); gain sqrt(2 / (1 + 5)) times sqrt(3 / fan_in) is 1 / sqrt(in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    auto a_values = at::empty({config.rank, in}, at::TensorOptions().dtype(at::kFloat)).uniform_(-bound, bound, generator);
    auto a = std::make_shared<LinearImpl>(in, config.rank, false, w.scalar_type());
    auto b = std::make_shared<LinearImpl>(config.rank, out, false, w.scalar_type());
    {
      at::NoGradGuard no_grad;
      a->weight.set_data(a_values.to(options));
      b->weight.set_data(at::zeros({out, config.rank}, options));
    }
    linear->lora_A = linear->register_module("lora_A", a);
    linear->lora_B = linear->register_module("lora_B", b);
    linear->lora_scale = config.scale();
    linear->lora_dropout = config.dropout;
    count += a->weight.numel() + b->weight.numel();
  }
  const bool gate_up = std::find(wanted.begin(), wanted.end(), kExpertGateUp) != wanted.end();
  const bool down = std::find(wanted.begin(), wanted.end(), kExpertDown) != wanted.end();
  for (auto& [name, group] : experts) {
    if (gate_up) count += add_expert_adapter(*group, "lora_gate_up_proj", group->gate_up_proj, config, generator);
    if (down) count += add_expert_adapter(*group, "lora_down_proj", group->down_proj, config, generator);
  }
  for (auto& item : model->named_parameters()) {
    bool adapter = item.key().ends_with(".lora_A.weight") || item.key().ends_with(".lora_B.weight");
    item.value().set_requires_grad(adapter);
  }
  return count;
}

void merge_lora(CausalTransformer& model) {
  if (!has_lora(*model)) dew::fail("merge_lora: the model has no LoRA adapters to merge");
  at::NoGradGuard no_grad;
  for (auto& [name, linear] : decoder_linears(*model)) {
    if (!linear->lora_A) continue;
    auto& w = linear->weight;
    auto delta = at::matmul(linear->lora_B->weight.to(at::kFloat), linear->lora_A->weight.to(at::kFloat)) * linear->lora_scale;
    w.copy_((w.to(at::kFloat) + delta).to(w.scalar_type()));
  }
  for (auto& [name, group] : decoder_experts(*model)) {
    for (auto [adapter, w] : {std::pair{group->gate_up_lora, group->gate_up_proj}, std::pair{group->down_lora, group->down_proj}}) {
      if (!adapter) continue;
      // Per expert: W_e += scale * B_e A_e, as one batched product.
      auto delta = at::bmm(adapter->lora_B->weight.to(at::kFloat), adapter->lora_A->weight.to(at::kFloat)) * adapter->scale;
      w.copy_((w.to(at::kFloat) + delta).to(w.scalar_type()));
    }
  }
  remove_lora(model);
}

void remove_lora(CausalTransformer& model) {
  for (auto& [name, linear] : decoder_linears(*model)) {
    if (!linear->lora_A) continue;
    linear->unregister_module("lora_A");
    linear->unregister_module("lora_B");
    linear->lora_A.reset();
    linear->lora_B.reset();
    linear->lora_scale = linear->lora_dropout = 0.0;
  }
  for (auto& [name, group] : decoder_experts(*model)) {
    if (group->gate_up_lora) group->unregister_module("lora_gate_up_proj");
    if (group->down_lora) group->unregister_module("lora_down_proj");
    group->gate_up_lora = nullptr;
    group->down_lora = nullptr;
  }
  for (auto& p : model->parameters()) p.set_requires_grad(true);
}

bool has_lora(const torch::nn::Module& module) { return !lora_parameters(module).empty(); }

AdaptersOff::AdaptersOff(CausalTransformer& model) {
  for (auto& [name, linear] : decoder_linears(*model)) {
    if (linear->lora_A && linear->lora_active) {
      linear->lora_active = false;
      adapted_.push_back(linear);
    }
  }
  for (auto& [name, group] : decoder_experts(*model)) {
    if ((group->gate_up_lora || group->down_lora) && group->lora_active) {
      group->lora_active = false;
      experts_.push_back(group);
    }
  }
}

AdaptersOff::~AdaptersOff() {
  for (auto& linear : adapted_) linear->lora_active = true;
  for (auto& group : experts_) group->lora_active = true;
}

std::map<std::string, at::Tensor> lora_parameters(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, p] : parameter_map(module)) {
    if (name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight")) out.emplace(name, p);
  }
  return out;
}

}  // namespace dew::nn
