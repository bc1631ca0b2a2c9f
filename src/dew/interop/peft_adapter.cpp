#include "dew/interop/peft_adapter.h"

#include <cmath>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors.h"
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

}  // namespace

void write_peft_adapter(const nn::CausalTransformer& model, const nn::LoraConfig& config,
                        const std::string& base_model_name_or_path, const fs::path& dir) {
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
  std::map<std::string, at::Tensor> tensors;
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
  for (const auto& [name, t] : adapters) tensors.emplace(kPrefix + name, t.detach());

  // The fields peft 0.21's LoraConfig writes that bear on what the adapter computes or how peft attaches it;
  // the rest (initialisation schemes, quantisation helpers) keep peft's defaults when absent.
  Json target = Json::array();
  for (const auto& name : config.module_names()) target.push_back(name);
  Json out = {
      {"alpha_pattern", Json::object()},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", base_model_name_or_path.empty() ? Json(nullptr) : Json(base_model_name_or_path)},
      {"bias", "none"},
      {"exclude_modules", nullptr},
      {"fan_in_fan_out", false},
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
      {"target_modules", target},
      {"task_type", "CAUSAL_LM"},
      {"use_dora", false},
      {"use_rslora", false},
  };
  AtomicDirectory staging(dir);
  formats::save_safetensors(staging.path() / kWeightsFile, tensors, {{"format", "pt"}});
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
  for (const char* key : {"use_dora", "use_rslora", "fan_in_fan_out", "lora_bias", "rank_pattern", "alpha_pattern",
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

nn::LoraConfig load_peft_adapter(nn::CausalTransformer& model, const fs::path& dir) {
  auto adapter = read_peft_adapter(dir);
  const auto weights_path = (dir / kWeightsFile).string();
  try {
    nn::add_lora(model, adapter.config, /*seed=*/0);  // every value is overwritten below
  } catch (const dew::Error& e) {
    dew::fail("cannot load the peft adapter '", dir.string(), "': ", e.what());
  }
  auto params = nn::lora_parameters(*model);
  // Everything is checked before any value is copied; on an error the model is left as it came.
  auto refuse = [&](const auto&... message) {
    nn::remove_lora(model);
    dew::fail(message...);
  };
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
      refuse("'", weights_path, "' has tensor '", kPrefix, name, "', which the model with target_modules ",
             adapter.config.modules, " does not have; is the adapter for another base model?");
    }
  }
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params) p.copy_(adapter.tensors.at(name));
  return adapter.config;
}

}  // namespace dew::interop
