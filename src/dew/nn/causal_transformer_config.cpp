#include "dew/nn/causal_transformer_config.h"

#include "dew/core/error.h"

namespace dew::nn {

std::int64_t CausalTransformerConfig::window_of_layer(std::int64_t layer) const {
  if (layer_types.empty()) return 0;
  const auto& type = layer_types.at(static_cast<std::size_t>(layer));
  auto it = kinds.find(type);
  return it == kinds.end() ? 0 : it->second.window;
}

void CausalTransformerConfig::validate() const {
  auto positive = [](std::int64_t value, const char* field) {
    if (value <= 0) dew::fail("model.", field, " must be positive, got ", value);
  };
  positive(vocab_size, "vocab_size");
  positive(emb_features, "emb_features");
  positive(num_layers, "num_layers");
  positive(num_heads, "num_heads");
  positive(max_seq_len, "max_seq_len");
  if (num_kv_heads < 0) dew::fail("model.num_kv_heads must be >= 0, got ", num_kv_heads);
  if (head_dim == 0 && emb_features % num_heads != 0) {
    dew::fail("model.emb_features (", emb_features, ") is not divisible by model.num_heads (", num_heads,
              "); change one, or set model.head_dim");
  }
  if (num_heads % resolved_kv_heads() != 0) {
    dew::fail("model.num_heads (", num_heads, ") must be a multiple of model.num_kv_heads (", resolved_kv_heads(), ")");
  }
  if (resolved_head_dim() % 2 != 0) dew::fail("the head dimension must be even for rotary positions, got ", resolved_head_dim());
  if (mlp != "swiglu" && mlp != "geglu" && mlp != "gelu") {
    dew::fail("model.mlp is '", mlp, "'; use swiglu, geglu or gelu");
  }
  if (!layer_types.empty() && static_cast<std::int64_t>(layer_types.size()) != num_layers) {
    dew::fail("model.layer_types has ", layer_types.size(), " entries but model.num_layers is ", num_layers);
  }
  for (const auto& type : layer_types) {
    if (type != "full_attention" && !kinds.count(type)) {
      dew::fail("model.layer_types names '", type, "', which model.kinds does not define; add model.kinds.", type,
                " = {\"window\": N} or use full_attention");
    }
  }
  for (const auto& [name, kind] : kinds) {
    if (kind.window < 0) dew::fail("model.kinds.", name, ".window must be >= 0, got ", kind.window);
  }
  for (const auto* field : {&dtype, &param_dtype}) {
    if (*field != "float32" && *field != "bfloat16" && *field != "float16") {
      dew::fail("model.", field == &dtype ? "dtype" : "param_dtype", " is '", *field, "'; use float32, bfloat16 or float16");
    }
  }
  if (rope_theta <= 0) dew::fail("model.rope_theta must be positive, got ", rope_theta);
  if (final_logit_softcap < 0) dew::fail("model.final_logit_softcap must be >= 0, got ", final_logit_softcap);
}

}  // namespace dew::nn
