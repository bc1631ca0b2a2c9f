#include "dew/interop/peft_adapter.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors.h"
#include "dew/interop/hf_lora_targets.h"
#include "dew/nn/parameters.h"

namespace dew::interop {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

const std::string kPrefix = "base_model.model.";  // where peft's PeftModelForCausalLM keeps the base model
const char* kConfigFile = "adapter_config.json";
const char* kWeightsFile = "adapter_model.safetensors";

// A whole number as a JSON integer (peft writes lora_alpha 16, not 16.0).
Json number(double value) {
  if (std::floor(value) == value && std::abs(value) < 1e15) return static_cast<std::int64_t>(value);
  return value;
}

// A peft switch that is off: absent, null, false, or an empty list or object.
bool unset(const Json& config, const std::string& key) {
  if (!config.contains(key)) return true;
  const auto& v = config[key];
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || ((v.is_object() || v.is_array()) && v.empty());
}

std::string module_of(const std::string& adapter_parameter) { return adapter_parameter.substr(0, adapter_parameter.rfind(".lora_")); }
std::string last_name(const std::string& path) { return path.substr(path.rfind('.') + 1); }

// The family's fused module holding a projection dew adapted on its own (GPT-2's attn.c_attn for
// model.layers.0.self_attn.q_proj), or "" when none does.
std::string fused_holder(const nn::LoraTargetNames& names, const std::string& dew_module) {
  const auto below_layer = dew_module.substr(dew_module.find('.', std::string("model.layers.").size()) + 1);
  for (const auto& entry : names) {
    if (entry.parts.size() > 1 && std::find(entry.parts.begin(), entry.parts.end(), below_layer) != entry.parts.end()) return entry.name;
  }
  return "";
}

// The model's adapters in `family`'s names: tensors keyed as peft keys them, target_modules, fan_in_fan_out.
struct FamilyAdapter {
  std::map<std::string, at::Tensor> tensors;
  Json targets = Json::array();
  bool fan_in_fan_out = false;
};

FamilyAdapter in_family_names(const nn::CausalTransformer& model, const std::string& family, const fs::path& dir) {
  const auto paths = hf_lora_module_paths(family, model);
  const auto names = hf_lora_target_names(family, model);
  FamilyAdapter out;
  std::set<std::string> adapted;  // dew modules (or fused adapters' places) with adapters
  for (const auto& [name, t] : nn::lora_parameters(*model)) {
    const auto module = module_of(name);
    auto it = paths.find(module);
    if (it == paths.end()) {
      const auto holder = fused_holder(names, module);
      if (holder.empty()) dew::fail("cannot write a peft adapter to '", dir.string(), "': family '", family, "' has no module for '", module, "'");
      dew::fail("cannot write a peft adapter to '", dir.string(), "': '", module, "' has an adapter of its own, but family '", family,
                "' stores that projection inside the fused '", holder, "', where peft puts one adapter on the whole matrix; train with "
                "lora.modules naming '", last_name(holder), "' (one adapter, as peft's), or export the merged model with --format hf");
    }
    out.tensors.emplace(kPrefix + it->second + name.substr(module.size()), t.detach());
    adapted.insert(module);
    out.fan_in_fan_out = out.fan_in_fan_out || hf_lora_module_is_conv1d(family, model, module);
  }
  // Each adapted module by its leaf (c_proj) where every module of that leaf is adapted, else by its path below
  // the layer (attn.c_proj): peft adapts every module whose path ends in a target.
  auto adapted_at_layer0 = [&](const nn::LoraTargetName& entry) {
    const std::string first = "model.layers.0." + entry.parts[0];
    return adapted.count(entry.parts.size() > 1 ? first.substr(0, first.rfind('.')) + "." + last_name(entry.name) : first) > 0;
  };
  for (const auto& entry : names) {
    if (!adapted_at_layer0(entry)) continue;
    bool whole_leaf = true;
    for (const auto& other : names) whole_leaf = whole_leaf && (last_name(other.name) != last_name(entry.name) || adapted_at_layer0(other));
    const auto target = whole_leaf ? last_name(entry.name) : entry.name;
    if (std::find(out.targets.begin(), out.targets.end(), target) == out.targets.end()) out.targets.push_back(target);
  }
  return out;
}

}  // namespace

void write_peft_adapter(const nn::CausalTransformer& model, const nn::LoraConfig& config,
                        const std::string& base_model_name_or_path, const fs::path& dir, const std::string& family) {
  config.validate();
  auto adapters = nn::lora_parameters(*model);
  if (adapters.empty()) dew::fail("cannot write a peft adapter to '", dir.string(), "': the model has no LoRA adapters");
  for (const auto& name : config.module_names()) {
    if (name.starts_with("experts.")) {
      // peft keeps these as target_parameters with its own [rank * experts, in] layout: not written yet.
      dew::fail("cannot write a peft adapter to '", dir.string(), "': lora.modules names '", name,
                "' (the grouped experts), which dew does not export as peft's target_parameters yet; merge the adapter "
                "into the weights and export the model instead");
    }
  }
  for (const auto& item : model->named_modules("", /*include_self=*/false)) {
    auto linear = std::dynamic_pointer_cast<nn::LinearImpl>(item.value());
    if (!linear || !linear->lora_A) continue;
    auto rank = linear->lora_A->weight.size(0);
    if (rank != config.rank || std::abs(linear->lora_scale - config.scale()) > 1e-12 * config.scale()) {
      dew::fail("cannot write a peft adapter to '", dir.string(), "': '", item.key(), "' has rank ", rank, " and scale ",
                linear->lora_scale, " but lora.rank is ", config.rank, " and lora.alpha / lora.rank is ", config.scale(),
                "; pass the config the adapters were made with");
    }
  }
  auto in_family = in_family_names(model, family, dir);

  // The fields peft 0.21's LoraConfig writes that bear on what the adapter computes or how peft attaches it;
  // the rest (initialisation schemes, quantisation helpers) keep peft's defaults when absent.
  Json out = {
      {"alpha_pattern", Json::object()},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", base_model_name_or_path.empty() ? Json(nullptr) : Json(base_model_name_or_path)},
      {"bias", "none"},
      {"exclude_modules", nullptr},
      {"fan_in_fan_out", in_family.fan_in_fan_out},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"lora_alpha", number(config.alpha)},
      {"lora_bias", false},
      {"lora_dropout", config.dropout},
      {"modules_to_save", nullptr},
      {"peft_type", "LORA"},
      {"r", config.rank},
      {"rank_pattern", Json::object()},
      {"revision", nullptr},
      {"target_modules", in_family.targets},
      {"task_type", "CAUSAL_LM"},
      {"use_dora", false},
      {"use_rslora", false},
  };
  AtomicDirectory staging(dir);
  formats::save_safetensors(staging.path() / kWeightsFile, in_family.tensors, {{"format", "pt"}});
  write_file_atomic(staging.path() / kConfigFile, out.dump(2) + "\n");
  staging.commit();
}

PeftAdapter read_peft_adapter(const fs::path& dir) {
  const auto config_path = dir / kConfigFile;
  const auto weights_path = dir / kWeightsFile;
  if (!fs::exists(config_path)) dew::fail("'", dir.string(), "' has no ", kConfigFile, "; is it a peft adapter directory?");
  const std::string where = config_path.string();
  Json j = config::parse_json_file(config_path);
  if (!j.is_object()) dew::fail("'", where, "' is not a JSON object");

  const Json peft_type = j.contains("peft_type") ? j["peft_type"] : Json(nullptr);
  if (peft_type != "LORA") dew::fail("'", where, "' has peft_type ", peft_type.dump(), "; dew reads LORA adapters only");
  if (j.contains("task_type") && !j["task_type"].is_null() && j["task_type"] != "CAUSAL_LM") {
    dew::fail("'", where, "' has task_type ", j["task_type"].dump(), "; dew reads CAUSAL_LM adapters (a decoder's)");
  }
  if (j.contains("bias") && j["bias"] != "none") {
    dew::fail("'", where, "' has bias ", j["bias"].dump(), "; dew's adapters have no biases (bias \"none\")");
  }
  // Each of these changes what peft computes (or which weights it touches) in a way dew does not reproduce.
  for (const char* key : {"use_dora", "use_rslora", "lora_bias", "rank_pattern", "alpha_pattern",
                          "layers_to_transform", "modules_to_save", "exclude_modules", "target_parameters",
                          "trainable_token_indices", "layer_replication", "use_qalora", "use_bdlora",
                          "alora_invocation_tokens", "arrow_config"}) {
    if (!unset(j, key)) {
      dew::fail("'", where, "' sets ", key, " = ", j[key].dump(), "; dew computes plain LoRA only (", key,
                " must be absent, null, false or empty)");
    }
  }

  PeftAdapter adapter;
  auto& lora = adapter.config;
  try {
    // peft's own defaults where a field is absent: r 8, lora_alpha 8, lora_dropout 0.
    lora.rank = j.contains("r") ? j["r"].get<std::int64_t>() : 8;
    lora.alpha = j.contains("lora_alpha") ? j["lora_alpha"].get<double>() : 8.0;
    lora.dropout = j.contains("lora_dropout") ? j["lora_dropout"].get<double>() : 0.0;
  } catch (const nlohmann::json::exception&) {
    dew::fail("'", where, "': r must be an integer and lora_alpha, lora_dropout numbers");
  }
  const auto& target = j.contains("target_modules") ? j["target_modules"] : Json(nullptr);
  if (!target.is_array() || target.empty()) {
    dew::fail("'", where, "' has target_modules ", target.dump(), "; dew reads a list of projection names "
              "(a regular expression or null is not supported)");
  }
  lora.modules.clear();
  for (const auto& name : target) {
    if (!name.is_string()) dew::fail("'", where, "' target_modules holds ", name.dump(), "; names must be strings");
    if (!lora.modules.empty()) lora.modules += ',';
    lora.modules += name.get<std::string>();
  }
  try {
    lora.validate();
    if (!lora.enabled()) dew::fail("r must be positive, got ", lora.rank);
  } catch (const dew::Error& e) {
    dew::fail("'", where, "': ", e.what());
  }
  adapter.fan_in_fan_out = !unset(j, "fan_in_fan_out");
  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string()) {
    adapter.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
  }

  if (!fs::exists(weights_path)) dew::fail("'", dir.string(), "' has no ", kWeightsFile, " (dew reads the safetensors form only)");
  formats::SafetensorsFile file(weights_path);
  for (const auto& name : file.names()) {
    if (name.rfind(kPrefix, 0) != 0 || !(name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight"))) {
      dew::fail("'", weights_path.string(), "' has tensor '", name, "', which is not a LoRA matrix named ", kPrefix,
                "<module>.lora_A.weight or .lora_B.weight");
    }
    auto tensor = file.load(name);
    nn::require_finite(tensor, weights_path.string(), name);
    adapter.tensors.emplace(name.substr(kPrefix.size()), tensor);
  }
  return adapter;
}

nn::LoraConfig load_peft_adapter(nn::CausalTransformer& model, const fs::path& dir, const std::string& family) {
  auto adapter = read_peft_adapter(dir);
  const auto config_path = (dir / kConfigFile).string(), weights_path = (dir / kWeightsFile).string();
  try {
    nn::add_lora(model, adapter.config, /*seed=*/0, hf_lora_target_names(family, model));  // every value is overwritten below
  } catch (const dew::Error& e) {
    dew::fail("cannot load the peft adapter '", dir.string(), "' onto a ", family, " model: ", e.what());
  }
  // Everything is checked before any value is copied; on an error the model is left as it came.
  auto refuse = [&](const auto&... message) {
    nn::remove_lora(model);
    dew::fail(message...);
  };
  const auto paths = hf_lora_module_paths(family, model);
  std::map<std::string, at::Tensor> params;  // the file's name (less base_model.model.) -> the model's tensor
  for (auto& [name, p] : nn::lora_parameters(*model)) {
    const auto module = module_of(name);
    auto path = paths.find(module);
    if (path == paths.end()) {
      refuse("'", config_path, "' target_modules ", adapter.config.modules, " adapt '", module, "', which a ", family,
             " checkpoint stores inside a fused matrix; a peft adapter for ", family, " names the family's modules");
    }
    if (adapter.fan_in_fan_out && !hf_lora_module_is_conv1d(family, model, module)) {
      refuse("'", config_path, "' sets fan_in_fan_out = true, but '", path->second, "' of a ", family,
             " model is a Linear ([out, in]), not GPT-2's Conv1D; is the adapter for another base model?");
    }
    params.emplace(path->second + name.substr(module.size()), p);
  }
  for (auto& [name, p] : params) {
    auto it = adapter.tensors.find(name);
    if (it == adapter.tensors.end()) refuse("'", weights_path, "' lacks tensor '", kPrefix, name, "' that target_modules implies");
    if (it->second.sizes() != p.sizes()) {
      refuse("'", weights_path, "' tensor '", kPrefix, name, "' has shape ", it->second.sizes(), " but the model expects ",
             p.sizes(), " (r = ", adapter.config.rank, "); is the adapter for another base model?");
    }
  }
  for (const auto& [name, t] : adapter.tensors) {
    if (!params.count(name)) {
      refuse("'", weights_path, "' has tensor '", kPrefix, name, "', which the ", family, " model with target_modules ",
             adapter.config.modules, " does not have; is the adapter for another base model?");
    }
  }
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params) p.copy_(adapter.tensors.at(name));
  return adapter.config;
}

}  // namespace dew::interop
