#include "dew/interop/hf_model.h"

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors_checkpoint.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_llada.h"
#include "dew/nn/dtype.h"
#include "dew/nn/parameters.h"

namespace dew::interop {

namespace fs = std::filesystem;

namespace {

// Buffers transformers recomputes and older checkpoints still carry.
bool ignorable(const std::string& name) { return name.ends_with(".rotary_emb.inv_freq"); }

// A family's tensor names: dew's own (Hugging Face Llama's) for every family but LLaDA, which has OLMo's.
struct TensorNames {
  bool llada;
  std::string stored(const std::string& dew_name) const { return llada ? llada_tensor_name(dew_name) : dew_name; }
  std::optional<std::string> dew(const std::string& stored_name) const {
    return llada ? dew_tensor_name_from_llada(stored_name) : std::optional<std::string>(stored_name);
  }
};

TensorNames tensor_names(const std::string& model_type) { return {hf_family_name(model_type) == "llada"}; }

void load_weights(nn::CausalTransformer& model, const formats::SafetensorsCheckpoint& weights, const fs::path& dir,
                  const TensorNames& names) {
  at::NoGradGuard no_grad;
  auto params = nn::parameter_map(*model);
  for (auto& [dew_name, p] : params) {
    const std::string name = names.stored(dew_name);
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
    weights.drop_pages(name);  // one resident copy of the weights while loading, not the map's and the model's
  }
  const std::string embed = names.stored("model.embed_tokens.weight"), head = names.stored("lm_head.weight");
  for (const auto& name : weights.names()) {
    auto dew_name = names.dew(name);
    if ((dew_name && params.count(*dew_name)) || ignorable(name)) continue;
    if (name == head && model->config().tie_embeddings) {
      // A tied checkpoint may carry the head as a copy; anything else would compute a different model.
      auto stored = weights.view(head), embedding = weights.view(embed);
      if (stored.sizes() != embedding.sizes() || !at::equal(stored.to(at::kFloat), embedding.to(at::kFloat))) {
        const char* tied = names.llada ? "weight_tying" : "tie_word_embeddings";
        dew::fail("'", weights.file_of(head).string(), "' has tensor '", head, "' that differs from '", embed,
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
  formats::SafetensorsCheckpoint weights(dir);
  out.model = nn::CausalTransformer(config, nn::ParameterInit::none);  // every weight is loaded next
  load_weights(out.model, weights, dir, tensor_names(out.model_type));
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

  const auto names = tensor_names(model_type);
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // in module order, as save_pretrained shards them
  for (const auto& item : model->named_parameters()) tensors.emplace_back(names.stored(item.key()), item.value());
  AtomicDirectory out(dir);
  formats::write_safetensors_checkpoint(out.path(), tensors, options.max_shard_bytes);
  write_file_atomic(out.path() / "generation_config.json", generation.dump(2) + "\n");
  write_file_atomic(out.path() / "config.json", hf.dump(2) + "\n");
  out.commit();
}

}  // namespace dew::interop
