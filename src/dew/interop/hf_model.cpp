#include "dew/interop/hf_model.h"

#include <map>
#include <set>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors_checkpoint.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_quantization.h"
#include "dew/interop/hf_tensor_layout.h"
#include "dew/nn/dtype.h"
#include "dew/nn/parameters.h"

namespace dew::interop {

namespace fs = std::filesystem;

namespace {

std::vector<std::vector<std::int64_t>> shapes_of(const std::map<std::string, at::Tensor>& params, const StoredTensor& entry) {
  std::vector<std::vector<std::int64_t>> out;
  for (const auto& part : entry.parts) out.push_back(params.at(part).sizes().vec());
  return out;
}

// How a model's experts are stored; `grouped` is the caller's.
ExpertStorage expert_storage(const nn::CausalTransformerConfig& c, bool grouped) {
  return {c.num_experts, c.resolved_expert_features(), grouped};
}

// Whether a checkpoint holds the experts grouped (transformers' in-memory names) rather than per expert.
bool grouped_experts(const nn::CausalTransformerConfig& c, const formats::SafetensorsCheckpoint& weights) {
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    if (c.is_moe_layer(i)) return weights.has("model.layers." + std::to_string(i) + ".mlp.experts.gate_up_proj");
  }
  return false;
}

// The family's layout, with its optional prefix left off when the checkpoint leaves it off (GPT-2's
// published weights are GPT2Model's: wte.weight), and its experts as the checkpoint stores them.
HfTensorLayout checkpoint_layout(const nn::CausalTransformer& model, const std::string& family,
                                 const formats::SafetensorsCheckpoint& weights) {
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  const auto& c = model->config();
  auto layout = hf_tensor_layout(family, names, c.num_layers, c.num_heads, expert_storage(c, grouped_experts(c, weights)));
  const auto& prefix = layout.optional_prefix;
  if (!prefix.empty() && !weights.has(layout.embedding) && weights.has(layout.embedding.substr(prefix.size()))) {
    auto strip = [&](std::string& name) {
      if (name.starts_with(prefix)) name = name.substr(prefix.size());
    };
    for (auto& entry : layout.tensors) strip(entry.name);
    strip(layout.embedding), strip(layout.head);
  }
  return layout;
}

void load_weights(nn::CausalTransformer& model, const formats::SafetensorsCheckpoint& weights, const fs::path& dir,
                  const std::string& family, const std::optional<Fp8Quantization>& fp8) {
  at::NoGradGuard no_grad;
  auto params = nn::parameter_map(*model);
  const auto layout = checkpoint_layout(model, family, weights);
  std::set<std::string> expected;
  for (const auto& entry : layout.tensors) {
    const std::string& name = entry.name;
    expected.insert(name);
    if (!weights.has(name)) {
      dew::fail("'", dir.string(), "' lacks tensor '", name, "' that the model (as config.json describes it) needs");
    }
    const auto shapes = shapes_of(params, entry);
    const auto want = fused_shape(entry, shapes);
    const auto& stored_entry = weights.entry(name);
    if (c10::IntArrayRef(stored_entry.shape) != c10::IntArrayRef(want)) {
      dew::fail("'", weights.file_of(name).string(), "' tensor '", name, "' has shape ", c10::IntArrayRef(stored_entry.shape),
                " but config.json implies ", c10::IntArrayRef(want));
    }
    const at::Tensor stored = stored_weight(weights, name, fp8);  // fp8 blocks dequantized to float32
    nn::require_finite(stored, weights.file_of(name).string(), name);
    auto parts = split_fused(entry, stored, shapes);
    for (std::size_t i = 0; i < parts.size(); ++i) stored_block(entry, params.at(entry.parts[i])).copy_(parts[i]);
    weights.drop_pages(name);  // one resident copy of the weights while loading, not the map's and the model's
    if (weights.entry(name).dtype == "F8_E4M3") expected.insert(name + "_scale_inv");  // consumed with its weight
  }
  for (const auto& name : weights.names()) {
    if (expected.count(name) || hf_ignorable_tensor(family, name)) continue;
    if (name == layout.head && model->config().tie_embeddings && weights.has(layout.embedding)) {
      // A tied checkpoint may carry the head as a copy; anything else would compute a different model.
      auto stored = weights.view(name), embedding = weights.view(layout.embedding);
      if (stored.sizes() != embedding.sizes() || !at::equal(stored.to(at::kFloat), embedding.to(at::kFloat))) {
        const char* tied = family == "llada" ? "weight_tying" : "tie_word_embeddings";
        dew::fail("'", weights.file_of(name).string(), "' has tensor '", name, "' that differs from '", layout.embedding,
                  "', but config.json says ", tied, "; set ", tied, " to false to load the separate head");
      }
      continue;
    }
    dew::fail("'", weights.file_of(name).string(), "' has tensor '", name, "', which the ", model->config().num_layers,
              "-layer model config.json describes does not have");
  }
}

}  // namespace

HfModel load_hf_model(const fs::path& dir, c10::ScalarType dtype) {
  auto config_path = dir / "config.json";
  if (!fs::exists(config_path)) dew::fail("'", dir.string(), "' has no config.json; is it a Hugging Face model directory?");
  HfModel out;
  out.hf_config = config::parse_json_file(config_path);
  auto config = config_from_hf(out.hf_config, config_path.string());
  out.model_type = hf_family_name(out.hf_config.value("model_type", ""));
  config.dtype = config.param_dtype = nn::dtype_name(dtype);
  const auto fp8 = read_quantization_config(out.hf_config, config_path.string());
  formats::SafetensorsCheckpoint weights(dir);
  out.model = nn::CausalTransformer(config, nn::ParameterInit::none);  // every weight is loaded next
  load_weights(out.model, weights, dir, out.model_type, fp8);
  out.model->eval();
  return out;
}

void save_hf_model(const nn::CausalTransformer& model, const std::string& model_type, const fs::path& dir,
                   const HfExportOptions& options) {
  const auto& config = model->config();
  auto hf = config_to_hf(config, model_type);  // refuses before anything is written
  hf["torch_dtype"] = nn::dtype_name(nn::parse_dtype(config.param_dtype));
  nlohmann::ordered_json generation = {{"_from_model_config", true}};
  auto ids = {std::pair{"bos_token_id", options.bos_token_id}, std::pair{"eos_token_id", options.eos_token_id},
              std::pair{"pad_token_id", options.pad_token_id}};
  for (const auto& [key, value] : ids) {
    if (value) hf[key] = generation[key] = *value;
  }

  // In module order, as save_pretrained shards them: a fused tensor where its first part is.
  std::vector<std::string> names;
  std::map<std::string, at::Tensor> params;
  for (const auto& item : model->named_parameters()) names.push_back(item.key()), params.emplace(item.key(), item.value());
  // Experts per expert, as save_pretrained writes them.
  const auto layout = hf_tensor_layout(hf_family_name(model_type), names, config.num_layers, config.num_heads,
                                       expert_storage(config, false));
  std::map<std::string, std::vector<const StoredTensor*>> by_first_part;  // several: an expert's blocks
  for (const auto& entry : layout.tensors) by_first_part[entry.parts.front()].push_back(&entry);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  at::NoGradGuard no_grad;
  for (const auto& name : names) {
    auto it = by_first_part.find(name);
    if (it == by_first_part.end()) continue;  // a later part of a fused tensor
    for (const auto* entry : it->second) {
      std::vector<at::Tensor> parts;
      for (const auto& part : entry->parts) parts.push_back(params.at(part).detach());
      tensors.emplace_back(entry->name, entry->fuse == Fuse::none ? parts[0] : fuse_parts(*entry, parts));
    }
  }
  AtomicDirectory out(dir);
  formats::write_safetensors_checkpoint(out.path(), tensors, options.max_shard_bytes);
  write_file_atomic(out.path() / "generation_config.json", generation.dump(2) + "\n");
  write_file_atomic(out.path() / "config.json", hf.dump(2) + "\n");
  out.commit();
}

}  // namespace dew::interop
