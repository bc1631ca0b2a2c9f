#include "dew/interop/hf_block_features.h"

#include "dew/core/error.h"

namespace dew::interop::detail {

void refuse_block_features(const nn::CausalTransformerConfig& c, const std::string& mt, const BlockFeatures& allowed) {
  auto refuse = [&](const std::string& field, const std::string& value) {
    dew::fail("cannot export as ", mt, ": model.", field, " is ", value, "; ", mt, " does not compute it");
  };
  if (!allowed.layernorm && c.norm != "rmsnorm") refuse("norm", c.norm);
  if (!allowed.learned_positions && c.positions != "rotary") refuse("positions", c.positions);
  if (!allowed.partial_rotary && c.positions == "rotary" && c.resolved_rotary_dim() != c.resolved_head_dim()) {
    refuse("rotary_dim", dew::str(c.rotary_dim, " (head_dim ", c.resolved_head_dim(), ")"));
  }
  if (!allowed.parallel_residual && c.parallel_residual) refuse("parallel_residual", "true");
  if (!allowed.post_norms_only && !c.pre_norms) refuse("pre_norms", "false");
  if (!allowed.whole_projection_qk_norm && c.qk_norm && !c.qk_norm_per_head) refuse("qk_norm_per_head", "false");
  if (!allowed.experts && c.num_experts > 0) refuse("num_experts", dew::str(c.num_experts, " (a mixture of experts)"));
  if (!allowed.multipliers) {
    if (c.residual_multiplier != 1.0) refuse("residual_multiplier", dew::str(c.residual_multiplier));
    if (c.attention_scale != 0.0) refuse("attention_scale", dew::str(c.attention_scale));
    if (c.logits_scaling != 1.0) refuse("logits_scaling", dew::str(c.logits_scaling));
  }
}

}  // namespace dew::interop::detail
