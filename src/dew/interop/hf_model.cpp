#include "dew/interop/hf_model.h"

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors_checkpoint.h"
#include "dew/interop/hf_config.h"
#include "dew/nn/dtype.h"
#include "dew/nn/parameters.h"

namespace dew::interop {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Buffers transformers recomputes and older checkpoints still carry.
bool ignorable(const std::string& name) { return ends_with(name, ".rotary_emb.inv_freq"); }

void load_weights(nn::CausalTransformer& model, const formats::SafetensorsCheckpoint& weights, const fs::path& dir) {
  at::NoGradGuard no_grad;
  auto params = nn::parameter_map(*model);
  for (auto& [name, p] : params) {
    if (!weights.has(name)) {
      dew::fail("'", dir.string(), "' lacks tensor '", name, "' that the model (as config.json describes it) needs");
    }
    const auto& entry = weights.entry(name);
    if (c10::IntArrayRef(entry.shape) != p.sizes()) {
      dew::fail("'", weights.file_of(name).string(), "' tensor '", name, "' has shape ", c10::IntArrayRef(entry.shape),
                " but config.json implies ", p.sizes());
    }
    const at::Tensor stored = weights.view(name);
    nn::require_finite(stored, weights.file_of(name).string(), name);
    p.copy_(stored);
  }
  const std::string embed = "model.embed_tokens.weight", head = "lm_head.weight";
  for (const auto& name : weights.names()) {
    if (params.count(name) || ignorable(name)) continue;
    if (name == head && model->config().tie_embeddings) {
      // A tied checkpoint may carry the head as a copy; anything else would compute a different model.
      auto stored = weights.view(head), embedding = weights.view(embed);
      if (stored.sizes() != embedding.sizes() || !at::equal(stored.to(at::kFloat), embedding.to(at::kFloat))) {
        dew::fail("'", weights.file_of(head).string(), "' has tensor '", head, "' that differs from '", embed,
                  "', but config.json says tie_word_embeddings; set tie_word_embeddings to false to load the separate head");
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
  out.model_type = out.hf_config.value("model_type", "");
  config.dtype = config.param_dtype = nn::dtype_name(dtype);
  formats::SafetensorsCheckpoint weights(dir);
  out.model = nn::CausalTransformer(config, nn::ParameterInit::none);  // every weight is loaded next
  load_weights(out.model, weights, dir);
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

  std::vector<std::pair<std::string, at::Tensor>> tensors;  // in module order, as save_pretrained shards them
  for (const auto& item : model->named_parameters()) tensors.emplace_back(item.key(), item.value());
  AtomicDirectory out(dir);
  formats::write_safetensors_checkpoint(out.path(), tensors, options.max_shard_bytes);
  write_file_atomic(out.path() / "generation_config.json", generation.dump(2) + "\n");
  write_file_atomic(out.path() / "config.json", hf.dump(2) + "\n");
  out.commit();
}

}  // namespace dew::interop
