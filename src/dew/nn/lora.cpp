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

// The A and B of an adapter on a fused matrix, registered on its parts' parent under the fused module's leaf
// name (model.layers.0.self_attn.c_attn.lora_A.weight); the parts hold pointers to them (LinearImpl::lora_rows).
class FusedLoraImpl : public torch::nn::Module {};

// One adapter add_lora makes: on one projection (rows empty), or one on a fused matrix shared by `parts`.
struct PlannedAdapter {
  std::vector<std::string> parts;               // dew module paths: model.layers.0.self_attn.q_proj, ...
  std::vector<std::vector<std::int64_t>> rows;  // fused: each part's rows of B
};

// "model.layers.3." of "model.layers.3.self_attn.q_proj".
std::string layer_prefix(const std::string& path) {
  static const std::string head = "model.layers.";
  return path.substr(0, path.find('.', head.size()) + 1);
}

std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('.')); }

// The family's names for its modules that are not dew's own (c_attn, attn.c_proj, dense), for errors.
std::string family_names(const LoraTargetNames& names) {
  std::set<std::string> family;
  for (const auto& entry : names) {
    if (entry.parts.size() > 1 || last_name(entry.name) != last_name(entry.parts.at(0))) family.insert(entry.name);
  }
  return family.empty() ? "" : "; its family's names for them are " + joined({family.begin(), family.end()});
}

// Every adapter lora.modules asks for, keyed by where its A and B live (sorted: the draw order). Errors: a
// name neither dew's nor the family's, a module the model lacks, a projection named twice.
std::map<std::string, PlannedAdapter> plan_lora(const std::map<std::string, std::shared_ptr<LinearImpl>>& linears,
                                                const LoraConfig& config, const LoraTargetNames& names) {
  std::set<std::string> present, layers;
  for (const auto& [name, linear] : linears) present.insert(last_name(name)), layers.insert(layer_prefix(name));
  const auto& choices = lora_module_choices();
  std::map<std::string, PlannedAdapter> plan;
  std::map<std::string, std::string> asked_by;  // dew module path -> the lora.modules name that adapts it
  auto add = [&](const std::string& asked, const std::string& where, PlannedAdapter adapter) {
    for (const auto& part : adapter.parts) {
      if (!linears.count(part)) dew::fail("lora.modules names '", asked, "', but this model has no '", part, "'");
      auto [it, fresh] = asked_by.emplace(part, asked);
      if (!fresh) {
        dew::fail("lora.modules names '", it->second, "' and '", asked, "', which both adapt '", part,
                  "'; list each projection once (a fused module's name covers all its parts)");
      }
    }
    plan.emplace(where, std::move(adapter));
  };
  for (const auto& wanted : config.module_names()) {
    if (wanted.starts_with("experts.")) continue;  // the grouped experts: add_lora's own adapters, not Linears
    if (std::find(choices.begin(), choices.end(), wanted) != choices.end()) {
      if (!present.count(wanted)) {
        std::vector<std::string> have;
        for (const auto& choice : choices) {
          if (present.count(choice)) have.push_back(choice);
        }
        dew::fail("lora.modules names '", wanted, "', which this model does not have", wanted == "gate_proj" ? " (its MLP is not gated)" : "",
                  "; its projections are ", joined(have), family_names(names));
      }
      for (const auto& [name, linear] : linears) {
        if (last_name(name) == wanted) add(wanted, name, {{name}, {}});
      }
      continue;
    }
    bool matched = false;
    for (const auto& entry : names) {
      if (entry.name != wanted && !entry.name.ends_with("." + wanted)) continue;
      matched = true;
      for (const auto& layer : layers) {
        PlannedAdapter adapter{{}, entry.parts.size() > 1 ? entry.rows : std::vector<std::vector<std::int64_t>>{}};
        for (const auto& part : entry.parts) adapter.parts.push_back(layer + part);
        const auto where = adapter.parts.size() > 1 ? parent_of(adapter.parts[0]) + "." + last_name(entry.name) : adapter.parts[0];
        add(wanted, where, std::move(adapter));
      }
    }
    if (!matched) {
      dew::fail("lora.modules names '", wanted, "', which is not a projection LoRA can adapt; choose from ", joined(choices),
                family_names(names),
                wanted == "lm_head" || wanted == "embed_tokens" ? " (the embedding and output head stay frozen)" : "");
    }
  }
  return plan;
}

// A and B for an adapter with these input and output widths, drawn as add_lora says.
std::pair<std::shared_ptr<LinearImpl>, std::shared_ptr<LinearImpl>> new_adapter(const at::Tensor& w, std::int64_t in, std::int64_t out,
                                                                                 std::int64_t rank, at::Generator& generator) {
  auto options = at::TensorOptions().dtype(w.scalar_type()).device(w.device());
  // peft: kaiming_uniform_(A, a=sqrt(5)); gain sqrt(2 / (1 + 5)) times sqrt(3 / fan_in) is 1 / sqrt(in).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  auto a_values = at::empty({rank, in}, at::TensorOptions().dtype(at::kFloat)).uniform_(-bound, bound, generator);
  auto a = std::make_shared<LinearImpl>(in, rank, false, w.scalar_type());
  auto b = std::make_shared<LinearImpl>(rank, out, false, w.scalar_type());
  at::NoGradGuard no_grad;
  a->weight.set_data(a_values.to(options));
  b->weight.set_data(at::zeros({out, rank}, options));
  return {a, b};
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

// lora.modules' grouped-expert names (which plan_lora leaves to add_lora): the model must have experts, and
// their adapters take no dropout.
void check_expert_targets(const std::map<std::string, std::shared_ptr<ExpertsImpl>>& experts, const LoraConfig& config) {
  for (const auto& name : config.module_names()) {
    if (!name.starts_with("experts.")) continue;
    if (experts.empty()) dew::fail("lora.modules names '", name, "', which this model does not have (it has no mixture-of-experts layer)");
    if (config.dropout > 0) {
      // The update is applied to the grouped weight, B A x for the whole expert: dropout on x alone cannot be
      // factored out of it (peft refuses it for target_parameters too).
      dew::fail("lora.dropout is ", config.dropout, " with lora.modules naming '", name, "'; adapters on the grouped experts take no dropout (set lora.dropout=0)");
    }
  }
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
  std::set<std::string> seen;
  for (const auto& name : module_names()) {
    if (name.empty()) dew::fail("lora.modules '", modules, "' has an empty name; list projections separated by single commas");
    if (!seen.insert(name).second) dew::fail("lora.modules names '", name, "' twice ('", modules, "'); list each once");
  }
}

void check_lora_modules(const CausalTransformer& model, const LoraConfig& config, const LoraTargetNames& names) {
  config.validate();
  plan_lora(decoder_linears(*model), config, names);
  check_expert_targets(decoder_experts(*model), config);
}

std::int64_t add_lora(CausalTransformer& model, const LoraConfig& config, std::uint64_t seed, const LoraTargetNames& names) {
  config.validate();
  if (!config.enabled()) dew::fail("add_lora needs lora.rank > 0 (got ", config.rank, ")");
  if (has_lora(*model)) dew::fail("the model already has LoRA adapters; merge them (merge_lora) before adding new ones");
  auto linears = decoder_linears(*model);
  const auto plan = plan_lora(linears, config, names);
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : model->named_modules("", /*include_self=*/false)) modules.emplace(item.key(), item.value());
  const auto experts = decoder_experts(*model);
  check_expert_targets(experts, config);
  const auto wanted = config.module_names();

  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::int64_t count = 0;
  for (const auto& [at_path, adapter] : plan) {
    const auto& first = linears.at(adapter.parts[0]);
    const auto in = first->weight.size(1);
    std::int64_t out = 0;
    for (std::size_t j = 0; j < adapter.parts.size(); ++j) {
      const auto part_out = linears.at(adapter.parts[j])->weight.size(0);
      if (!adapter.rows.empty() && static_cast<std::int64_t>(adapter.rows.at(j).size()) != part_out) {
        dew::fail("'", at_path, "': the family's layout gives '", adapter.parts[j], "' ", adapter.rows[j].size(), " rows but it has ", part_out);
      }
      out += part_out;
    }
    auto [a, b] = new_adapter(first->weight, in, out, config.rank, generator);
    if (adapter.rows.empty()) {
      first->lora_A = first->register_module("lora_A", a);
      first->lora_B = first->register_module("lora_B", b);
    } else {
      auto holder = std::make_shared<FusedLoraImpl>();
      holder->register_module("lora_A", a);
      holder->register_module("lora_B", b);
      modules.at(parent_of(at_path))->register_module(last_name(at_path), holder);
    }
    for (std::size_t j = 0; j < adapter.parts.size(); ++j) {
      auto& linear = *linears.at(adapter.parts[j]);
      linear.lora_A = a, linear.lora_B = b;
      if (!adapter.rows.empty()) linear.lora_rows = at::tensor(adapter.rows[j], at::kLong);
      // With dropout each part draws its own mask where peft draws one for the fused input: the same
      // distribution per part; at dropout 0 the two compute the same function.
      linear.lora_scale = config.scale();
      linear.lora_dropout = config.dropout;
    }
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
    auto b = linear->lora_B->weight.to(at::kFloat);
    if (linear->lora_rows.defined()) b = b.index_select(0, linear->lora_rows.to(b.device()));
    auto delta = at::matmul(b, linear->lora_A->weight.to(at::kFloat)) * linear->lora_scale;
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
    if (!linear->lora_rows.defined()) {  // a fused adapter's A and B are its holder's, removed below
      linear->unregister_module("lora_A");
      linear->unregister_module("lora_B");
    }
    linear->lora_A.reset();
    linear->lora_B.reset();
    linear->lora_rows = at::Tensor();
    linear->lora_scale = linear->lora_dropout = 0.0;
  }
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, std::string>> holders;
  for (const auto& module : model->modules(/*include_self=*/true)) {
    for (const auto& child : module->named_children()) {
      if (std::dynamic_pointer_cast<FusedLoraImpl>(child.value())) holders.emplace_back(module, child.key());
    }
  }
  for (auto& [parent, name] : holders) parent->unregister_module(name);
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
