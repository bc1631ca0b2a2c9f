#include "dew/nn/causal_transformer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <map>
#include <utility>

#include "dew/core/error.h"
#include "dew/nn/attention_mask.h"
#include "dew/nn/decoder_layer_calls.h"
#include "dew/nn/dtype.h"
#include "dew/nn/parameter_count.h"
#include "dew/nn/quantized/quantized_matrix.h"

namespace dew::nn {

EmbeddingImpl::EmbeddingImpl(std::int64_t vocab, std::int64_t features, c10::ScalarType param_dtype) {
  weight = register_parameter("weight", at::empty({vocab, features}, at::TensorOptions().dtype(param_dtype)));
}

namespace {
Norm make_norm(const CausalTransformerConfig& config, c10::ScalarType param_dtype) {
  return Norm(config.emb_features, config, param_dtype);
}
}  // namespace

DecoderBlockImpl::DecoderBlockImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype, std::int64_t layer)
    : compute_dtype_(parse_dtype(config.dtype)),
      parallel_residual_(config.parallel_residual),
      residual_multiplier_(config.residual_multiplier) {
  if (config.pre_norms) input_layernorm = register_module("input_layernorm", make_norm(config, param_dtype));
  self_attn = register_module("self_attn", Attention(config, param_dtype));
  post_attention_layernorm = register_module("post_attention_layernorm", make_norm(config, param_dtype));
  if (config.sandwich_norms) {
    if (config.pre_norms) pre_feedforward_layernorm = register_module("pre_feedforward_layernorm", make_norm(config, param_dtype));
    post_feedforward_layernorm = register_module("post_feedforward_layernorm", make_norm(config, param_dtype));
  }
  if (config.is_moe_layer(layer)) {
    moe = register_module("mlp", MixtureOfExperts(config, param_dtype));
  } else {
    mlp = register_module("mlp", Mlp(config, param_dtype));
  }
}

at::Tensor DecoderBlockImpl::feed_forward(const at::Tensor& x) { return moe ? moe->forward(x) : mlp->forward(x); }

at::Tensor DecoderBlockImpl::forward(const at::Tensor& x, const AttentionCall& call) {
  // The norms compute in float32 and return the residual's dtype; a sublayer's input is cast to the compute
  // dtype (a no-op when the two agree), and `x + sublayer(...)` sums in the wider of the two.
  // A null norm (OLMo 2 has no pre-norms) passes its input through.
  auto in = [&](Norm& norm, const at::Tensor& t) { return (norm ? norm->forward(t) : t).to(compute_dtype_); };
  // Granite scales each sublayer's output before adding it; 1 elsewhere, and then no multiply at all.
  auto scaled = [&](const at::Tensor& t) { return residual_multiplier_ == 1.0 ? t : t * residual_multiplier_; };
  if (post_feedforward_layernorm) {  // Gemma 2/3, OLMo 2: each sublayer's output is normed before its residual add
    auto h = x + scaled(post_attention_layernorm->forward(self_attn->forward(in(input_layernorm, x), call)));
    return h + scaled(post_feedforward_layernorm->forward(feed_forward(in(pre_feedforward_layernorm, h))));
  }
  if (parallel_residual_) {  // GPT-NeoX: both sublayers read the block's input, summed as transformers sums them
    auto attention = self_attn->forward(in(input_layernorm, x), call);
    return feed_forward(in(post_attention_layernorm, x)) + attention + x;
  }
  auto h = x + scaled(self_attn->forward(in(input_layernorm, x), call));
  return h + scaled(feed_forward(in(post_attention_layernorm, h)));
}

DecoderStackImpl::DecoderStackImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype) {
  embed_tokens = register_module("embed_tokens", Embedding(config.vocab_size, config.emb_features, param_dtype));
  if (config.positions == "learned") {
    embed_positions = register_module("embed_positions", Embedding(config.max_seq_len, config.emb_features, param_dtype));
  }
  layers = register_module("layers", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < config.num_layers; ++i) layers->push_back(DecoderBlock(config, param_dtype, i));
  norm = register_module("norm", make_norm(config, param_dtype));
}

CausalTransformerImpl::CausalTransformerImpl(CausalTransformerConfig config, ParameterInit init)
    : config_(std::move(config)) {
  config_.validate();
  compute_dtype_ = parse_dtype(config_.dtype);
  param_dtype_ = parse_dtype(config_.param_dtype);
  residual_dtype_ = parse_dtype(config_.residual_dtype);
  try {
    model = register_module("model", DecoderStack(config_, param_dtype_));
    if (!config_.tie_embeddings) {
      lm_head = register_module("lm_head", Linear(config_.emb_features, config_.vocab_size, false, param_dtype_));
    }
  } catch (const c10::Error& e) {
    // The allocator's error (with a LibTorch stack trace) says neither which setting nor how much: say both.
    const double count = static_cast<double>(nn::parameter_count(config_));
    std::string reason = e.what_without_backtrace();
    reason = reason.substr(0, reason.find('\n'));
    dew::fail("cannot allocate the model's parameters: model.num_layers = ", config_.num_layers, ", model.emb_features = ",
              config_.emb_features, ", model.mlp_features = ", config_.resolved_mlp_features(), ", model.vocab_size = ",
              config_.vocab_size, " give ", count, " parameters, ", count * static_cast<double>(c10::elementSize(param_dtype_)) / (1 << 30),
              " GiB of ", config_.param_dtype, " (", reason, "); lower model.num_layers or model.emb_features");
  }
  if (init == ParameterInit::seeded) init_parameters(0);
}

const at::Tensor& CausalTransformerImpl::output_weight() const {
  return config_.tie_embeddings ? model->embed_tokens->weight : lm_head->weight;
}

const QuantizedMatrix* CausalTransformerImpl::output_quantized() const {
  return config_.tie_embeddings ? model->embed_tokens->quantized.get() : lm_head->quantized.get();
}

void CausalTransformerImpl::init_parameters(std::uint64_t seed) {
  at::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std_dev = 0.02, residual_std = 0.02 / std::sqrt(2.0 * config_.num_layers);
  // Sorted names make the draw order independent of registration details.
  std::map<std::string, at::Tensor> sorted;
  for (const auto& item : named_parameters()) sorted.emplace(item.key(), item.value());
  for (auto& [name, p] : sorted) {
    if (name.ends_with("norm.weight")) {
      p.fill_(1.0 - config_.norm_weight_offset);  // the identity scale
    } else if (name.ends_with(".bias")) {
      p.zero_();
    } else {
      bool residual = name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight") || name.ends_with("experts.down_proj");
      auto values = at::empty(p.sizes(), at::TensorOptions().dtype(at::kFloat));
      values.normal_(0.0, residual ? residual_std : std_dev, generator);
      p.copy_(values);
    }
  }
}

std::int64_t CausalTransformerImpl::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

at::Tensor CausalTransformerImpl::hidden_states(const DecoderInputs& in) {
  check_decoder_call(in, config_);
  const auto& table = model->embed_tokens;
  // Rows gathered, then cast to the residual stream's dtype (the same values as casting the table first,
  // without a cast of all of it). A float32 stream starts from the stored values, as under autocast, where
  // the embedding lookup is not a bfloat16 op.
  auto x = table->quantized ? table->quantized->embedding(in.ids).to(residual_dtype_)
                            : at::embedding(table->weight, in.ids).to(residual_dtype_);
  if (config_.embedding_scale != 1.0) x = x * config_.embedding_scale;
  if (model->embed_positions) {  // learned positions (GPT-2), at each token's own position (left padding, cache)
    auto positions = in.positions.defined() ? in.positions : at::arange(in.ids.size(1), in.ids.options().dtype(at::kLong)).unsqueeze(0);
    x = x + at::embedding(model->embed_positions->weight, positions).to(residual_dtype_);
  }
  if (runner_ && config_.has_moe() && at::GradMode::is_enabled()) {
    // The runner (sharded training) runs each layer without gradients and again in backward: the routers'
    // losses, read after the forward, would have no gradient.
    dew::fail("trainer.parallel = fsdp (layer-sharded training) of a mixture-of-experts model (model.num_experts = ", config_.num_experts,
              ") is not supported: the router losses need the layers' forward with gradients; use trainer.parallel = ddp");
  }
  DecoderLayerCalls calls(config_, in, compute_dtype_);
  router_records_.clear();
  for (std::int64_t i = 0; i < config_.num_layers; ++i) {
    const AttentionCall call = calls.call(i);
    auto* block = model->layers[i]->as<DecoderBlockImpl>();
    if (runner_) {
      // The runner may call the layer again later (in backward): the call keeps its own copy of the angles,
      // which live in `calls`.
      auto angles = call.angles ? std::make_shared<RotaryAngles>(*call.angles) : nullptr;
      x = runner_(i, x, [block, call, angles](const at::Tensor& h) {
        AttentionCall again = call;
        again.angles = angles.get();
        return block->forward(h, again);
      });
    } else {
      x = block->forward(x, call);
    }
    if (block->moe) router_records_.push_back(block->moe->take_record());
  }
  return model->norm->forward(x).to(compute_dtype_);
}

std::vector<RouterRecord> CausalTransformerImpl::take_router_records() { return std::exchange(router_records_, {}); }

std::vector<std::shared_ptr<torch::nn::Module>> CausalTransformerImpl::stacked_layers() {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  for (std::size_t i = 0; i < model->layers->size(); ++i) out.push_back(model->layers->ptr(i));
  return out;
}

at::Tensor CausalTransformerImpl::logits(const at::Tensor& hidden) const {
  const QuantizedMatrix* head = output_quantized();
  auto out = head ? head->linear(hidden) : dense(hidden, output_weight()).to(at::kFloat);
  if (config_.logits_scaling != 1.0) out = out / config_.logits_scaling;  // Granite
  if (config_.final_logit_softcap > 0) {
    out = at::tanh(out / config_.final_logit_softcap) * config_.final_logit_softcap;
  }
  return out;
}

at::Tensor CausalTransformerImpl::token_prediction_states(const at::Tensor& hidden) const {
  if (!config_.shift_logits || hidden.size(1) < 2) return hidden;
  return at::cat({hidden.narrow(1, 0, 1), hidden.narrow(1, 0, hidden.size(1) - 1)}, 1);
}

at::Tensor CausalTransformerImpl::forward(const DecoderInputs& inputs) { return logits(hidden_states(inputs)); }

}  // namespace dew::nn
