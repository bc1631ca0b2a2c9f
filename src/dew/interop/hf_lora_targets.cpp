#include "dew/interop/hf_lora_targets.h"

#include <algorithm>
#include <vector>

#include "dew/core/error.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_tensor_layout.h"

namespace dew::interop {

namespace {

const std::string kWeight = ".weight";

std::string without_weight(const std::string& name) { return name.substr(0, name.size() - kWeight.size()); }
std::string last_name(const std::string& path) { return path.substr(path.rfind('.') + 1); }
std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('.')); }

// A stored matrix of the family made of decoder projections (dew's modules in layers, not adapters).
struct AdaptableModule {
  std::string dew_path;            // the projection, or a fused matrix's model.layers.N.<parent>.<stored leaf>
  std::string stored;              // the family's module path: transformer.h.0.attn.c_attn
  std::vector<std::string> parts;  // dew module paths, in the stored order
  StoredTensor entry;              // the layout's entry for its weight
};

bool is_projection(const std::string& module) {
  const auto& choices = nn::lora_module_choices();
  return module.starts_with("model.layers.") && module.find(".lora_") == std::string::npos &&
         std::find(choices.begin(), choices.end(), last_name(module)) != choices.end();
}

std::vector<AdaptableModule> adaptable_modules(const std::string& family, const nn::CausalTransformer& model) {
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  const auto& config = model->config();
  std::vector<AdaptableModule> out;
  for (const auto& entry : hf_tensor_layout(hf_family_name(family), names, config.num_layers, config.num_heads).tensors) {
    if (!entry.name.ends_with(kWeight)) continue;
    AdaptableModule module{{}, without_weight(entry.name), {}, entry};
    bool projections = true;
    for (const auto& part : entry.parts) {
      module.parts.push_back(without_weight(part));
      projections = projections && part.ends_with(kWeight) && is_projection(module.parts.back());
    }
    if (!projections) continue;
    module.dew_path = module.parts.size() == 1 ? module.parts[0] : parent_of(module.parts[0]) + "." + last_name(module.stored);
    out.push_back(std::move(module));
  }
  return out;
}

// Part j's rows of the fused matrix: the layout's split applied to the row numbers themselves.
std::vector<std::vector<std::int64_t>> fused_rows(const StoredTensor& entry, const std::vector<std::int64_t>& part_rows) {
  std::int64_t total = 0;
  std::vector<std::vector<std::int64_t>> shapes;
  for (auto n : part_rows) total += n, shapes.push_back({n});
  // A 1-D tensor splits as a bias does (GPT-2's Conv1D stacks without the transpose), the rows' own order.
  auto parts = split_fused(entry, at::arange(total, at::kLong), shapes);
  std::vector<std::vector<std::int64_t>> rows;
  for (const auto& part : parts) {
    auto contiguous = part.contiguous();
    rows.emplace_back(contiguous.data_ptr<std::int64_t>(), contiguous.data_ptr<std::int64_t>() + contiguous.numel());
  }
  return rows;
}

}  // namespace

nn::LoraTargetNames hf_lora_target_names(const std::string& family, const nn::CausalTransformer& model) {
  static const std::string layer0 = "model.layers.0.";
  auto params = model->named_parameters();
  nn::LoraTargetNames out;
  for (const auto& module : adaptable_modules(family, model)) {
    if (!module.parts[0].starts_with(layer0)) continue;
    // The path below the layer: what follows the layer index 0 (transformer.h.0.attn.c_attn -> attn.c_attn).
    const auto cut = module.stored.find(".0.");
    if (cut == std::string::npos) dew::fail("family '", family, "' stores '", module.parts[0], "' as '", module.stored, "', outside a layer");
    nn::LoraTargetName name{module.stored.substr(cut + 3), {}, {}};
    std::vector<std::int64_t> outs;
    for (const auto& part : module.parts) {
      name.parts.push_back(part.substr(layer0.size()));
      outs.push_back(params[part + kWeight].size(0));
    }
    if (module.parts.size() > 1) name.rows = fused_rows(module.entry, outs);
    out.push_back(std::move(name));
  }
  return out;
}

std::map<std::string, std::string> hf_lora_module_paths(const std::string& family, const nn::CausalTransformer& model) {
  std::map<std::string, std::string> out;
  for (const auto& module : adaptable_modules(family, model)) out.emplace(module.dew_path, module.stored);
  return out;
}

bool hf_lora_module_is_conv1d(const std::string& family, const nn::CausalTransformer& model, const std::string& dew_module) {
  for (const auto& module : adaptable_modules(family, model)) {
    if (module.dew_path == dew_module) return module.entry.fuse == Fuse::conv1d;
  }
  return false;
}

}  // namespace dew::interop
