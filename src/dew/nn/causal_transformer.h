#pragma once
// CausalTransformer: a pre-norm decoder (RMSNorm, grouped-query attention with rotary positions,
// gated MLP), parameters named as Hugging Face Llama/Qwen3 name them:
//   model.embed_tokens.weight, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm,
//   post_attention_layernorm, mlp.{gate,up,down}_proj}.weight, model.norm.weight, lm_head.weight (untied only).
// With sandwich_norms (Gemma 2/3) a block also has pre_feedforward_layernorm and post_feedforward_layernorm,
// and post_attention_layernorm normalises the attention output before the residual add, as Gemma names them;
// without pre_norms (OLMo 2) a block has only those two post-norms. norm = layernorm gives every norm a bias
// (GPT-2, GPT-NeoX); positions = learned adds model.embed_positions.weight [max_seq_len, E] to the embeddings
// (GPT-2). Other families' tensor names are mapped to these in interop/.
#include <cstdint>

#include "dew/nn/attention.h"
#include "dew/nn/layer_stack.h"
#include "dew/nn/mixture_of_experts.h"

namespace dew::nn {

// What one forward pass reads. Only ids is required.
struct DecoderInputs {
  at::Tensor ids;          // [B, S] int64
  at::Tensor positions;    // [B, S] int64; default 0..S-1; required with a cache (they name its slots)
  at::Tensor segment_ids;  // [B, S] int64; 0 = padding; tokens attend only within their segment
  KVCache* cache = nullptr;  // write this call's keys/values at their positions, attend over slots [0, span)
  // [B, 1, S, S] bool, optional (no cache, no segment_ids): which keys each query attends to, replacing the
  // causal rule, for layouts segments cannot say (DPO's shared prompt: two completions after one prompt).
  // Sliding-window layers still apply their window on top. Every row must allow at least its own slot.
  at::Tensor attention_mask;
  // [B] int64, optional, longrope models only (rotary.h): the length by which each row's rotary frequencies
  // are chosen; default its largest position + 1. The engine passes a prompt's whole length to each of its
  // prefill chunks, and the length a row will have when it recomputes its cache past the boundary.
  at::Tensor rope_lengths;
};

// The token table. For inference it may be held `quantized` (nn/quantized/; `weight` then an empty
// placeholder): lookups dequantize the rows they read, and a tied output head multiplies with it.
class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(std::int64_t vocab, std::int64_t features, c10::ScalarType param_dtype);
  at::Tensor weight;
  std::shared_ptr<const QuantizedMatrix> quantized;
};
TORCH_MODULE(Embedding);

class DecoderBlockImpl : public torch::nn::Module {
 public:
  // Layer `layer`'s block: its MLP is a mixture of experts where config.is_moe_layer(layer).
  DecoderBlockImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype, std::int64_t layer = 0);
  // x [B, S, E] in the residual dtype; the sublayers compute in the compute dtype and their outputs are
  // added to x in x's dtype.
  at::Tensor forward(const at::Tensor& x, const AttentionCall& call);
  Norm input_layernorm{nullptr}, post_attention_layernorm{nullptr};  // input_layernorm: pre_norms only
  Norm pre_feedforward_layernorm{nullptr}, post_feedforward_layernorm{nullptr};  // sandwich_norms only (pre_: with pre_norms)
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
  MixtureOfExperts moe{nullptr};  // registered as "mlp" in place of the dense one (transformers' name)

 private:
  at::Tensor feed_forward(const at::Tensor& x);
  c10::ScalarType compute_dtype_;
  bool parallel_residual_;
  double residual_multiplier_;
};
TORCH_MODULE(DecoderBlock);

// The "model." part: embeddings, blocks and the final norm.
class DecoderStackImpl : public torch::nn::Module {
 public:
  DecoderStackImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype);
  Embedding embed_tokens{nullptr};
  Embedding embed_positions{nullptr};  // positions = learned only
  torch::nn::ModuleList layers{nullptr};
  Norm norm{nullptr};
};
TORCH_MODULE(DecoderStack);

// What the constructor puts in the parameters: the seed-0 initialisation, or nothing (norm scales are still
// the identity) for a model whose weights are about to be loaded -- initialising 135M parameters only to
// overwrite them took most of a checkpoint's load time.
enum class ParameterInit { seeded, none };

class CausalTransformerImpl : public torch::nn::Module, public LayerStack {
 public:
  // Validates the config.
  explicit CausalTransformerImpl(CausalTransformerConfig config, ParameterInit init = ParameterInit::seeded);

  // Logits in fp32, [B, S, vocab_size] (soft-capped when final_logit_softcap > 0).
  at::Tensor forward(const DecoderInputs& inputs);
  // The final-normed hidden states in the compute dtype, [B, S, emb_features].
  at::Tensor hidden_states(const DecoderInputs& inputs);
  // Hidden states -> fp32 logits; lets a loss compute logits one vocabulary or sequence chunk at a time.
  at::Tensor logits(const at::Tensor& hidden) const;
  // The states whose logits predict each position's own token (masked diffusion): `hidden` itself, or with
  // config.shift_logits (Dream) each position's predecessor's, position 0 keeping its own, as Dream's
  // sampler aligns them.
  at::Tensor token_prediction_states(const at::Tensor& hidden) const;
  // The output projection's weight (the embedding matrix when tied); an empty placeholder when that
  // matrix is held quantized (output_quantized()).
  const at::Tensor& output_weight() const;
  // The output projection's quantized matrix, or null when it is a float parameter.
  const QuantizedMatrix* output_quantized() const;

  // Deterministic initialisation from a seed, independent of device: N(0, 0.02) for matrices (output
  // projections scaled by 1/sqrt(2 * num_layers)), ones for norms, zeros for biases.
  void init_parameters(std::uint64_t seed);

  std::int64_t parameter_count() const;
  const CausalTransformerConfig& config() const { return config_; }
  c10::ScalarType compute_dtype() const { return compute_dtype_; }

  DecoderStack model{nullptr};
  Linear lm_head{nullptr};

  // The routers' decisions in the last forward, one per mixture-of-experts layer in layer order, handed over
  // (empty for a dense model): what the router losses (objectives/router_losses.h) read.
  std::vector<RouterRecord> take_router_records();

  // LayerStack: the decoder blocks.
  std::vector<std::shared_ptr<torch::nn::Module>> stacked_layers() override;
  void set_layer_runner(LayerRunner runner) override { runner_ = std::move(runner); }

 private:
  LayerRunner runner_;
  std::vector<RouterRecord> router_records_;
  CausalTransformerConfig config_;
  c10::ScalarType compute_dtype_, param_dtype_, residual_dtype_;
};
TORCH_MODULE(CausalTransformer);

}  // namespace dew::nn
