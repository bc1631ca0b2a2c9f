#pragma once
// The llama.cpp architectures (general.architecture) dew reads and writes as GGUF: one row each, used by
// both load_gguf_model (gguf_model.h) and save_gguf_model (gguf_export.h). A row says what llama.cpp's
// converter (convert_hf_to_gguf.py) writes for the architecture and what its C++ computes
// (src/models/ARCH.cpp): the block's features, the tensors it renames or fuses, and the metadata keys of
// the features. Everything a row does not list is refused by field name, on load (metadata key or tensor)
// and on export (the CausalTransformerConfig field). A new architecture is a row; a feature several
// architectures share is a flag and one reader/writer pair in gguf_architecture.cpp.
//
// Mixture-of-experts rows (ARCH.expert_count > 0, ffn_*_exps tensors) are refused for now; an MoE row
// would add its expert keys to read_features/write_features and its expert tensors to the layout.
#include <cstdint>
#include <string>
#include <vector>

#include "dew/formats/gguf_file.h"
#include "dew/formats/gguf_writer.h"
#include "dew/nn/causal_transformer_config.h"

namespace dew::interop {

// Which attention/MLP biases the architecture's tensors carry.
enum class GgufBiases {
  optional,  // each present when its tensor is (llama, granite: q/k/v, o, ffn biases are TENSOR_NOT_REQUIRED)
  qkv,       // q/k/v always, no o/MLP biases (qwen2)
  all,       // q/k/v, o and MLP biases always (gpt2, gptneox)
  none,
};

// Which layers slide, and how the file says so.
enum class GgufSliding {
  none,     // no sliding window keys
  pattern,  // attention.sliding_window + attention.sliding_window_pattern (int period or one bool per layer)
  all,      // attention.sliding_window on every layer, 0 = none (phi3)
};

struct GgufArchitecture {
  std::string name;  // general.architecture
  std::vector<std::string> hf_families;  // Hugging Face model_types the converter writes as this (mistral -> llama)
  std::string mlp;   // the MLP llama.cpp computes: swiglu, geglu (gelu-tanh gate) or gelu (tanh, ungated)
  bool layer_norm = false;       // LayerNorm with biases, eps in attention.layer_norm_epsilon (gpt2, gptneox)
  bool learned_positions = false;  // position_embd.weight, no rotary (gpt2)
  bool permuted_qk = false;      // llama.cpp ropes interleaved pairs: the converter permuted q/k rows (llama, granite)
  bool fused_qkv = false;        // blk.N.attn_qkv = [q; k; v] (phi3, gpt2, gptneox)
  bool fused_gate_up = false;    // blk.N.ffn_up = [gate; up], no ffn_gate (phi3)
  GgufBiases biases = GgufBiases::none;
  bool qk_norm = false;          // attn_q_norm / attn_k_norm (per head; whole projection with post_norms_only)
  bool sandwich = false;         // post_attention_norm, (ffn_norm), post_ffw_norm (gemma2, gemma3, olmo2)
  bool post_norms_only = false;  // no attn_norm / ffn_norm, only the norms after each sublayer (olmo2)
  bool gemma = false;            // stored norms are HF's weight + 1; embeddings scaled by sqrt(embedding_length)
  bool tied_always = false;      // llama.cpp ignores output.weight and uses token_embd (gemma, gemma2)
  bool output_required = false;  // llama.cpp needs output.weight (olmo2): written even when tied
  bool attn_softcap = false;     // attn_logit_softcapping (gemma2; default 50)
  bool final_softcap = false;    // final_logit_softcapping (gemma2 default 30, gemma3 default 0)
  double default_final_softcap = 0.0;
  GgufSliding sliding = GgufSliding::none;
  std::int64_t default_window = 0;   // pattern: when attention.sliding_window is absent (gemma2: 4096; 0 = none)
  std::int64_t default_period = 0;   // pattern: layer i slides when i % period < period - 1 (llama.cpp's set_swa_pattern)
  double default_local_theta = 0.0;  // rope.freq_base_swa's default; 0 = the global base, scaled as it is (gemma2)
  bool partial_rotary = false;   // rope.dimension_count may be below head_dim (phi3, gptneox)
  bool write_rope_dims = false;  // the converter writes rope.dimension_count (llama, phi3, gptneox)
  bool parallel_residual = false;  // use_parallel_residual (gptneox)
  bool multipliers = false;      // attention.scale, embedding_scale, residual_scale, logit_scale (granite)
};

// The row named `name`, or an error naming `source`, the key and the architectures dew reads.
const GgufArchitecture& gguf_architecture(const std::string& name, const std::string& source);
// For export: the row named `name` or the row the converter writes Hugging Face model_type `name` as
// (gemma3_text -> gemma3, gpt_neox -> gptneox, mistral -> llama).
const GgufArchitecture& gguf_export_architecture(const std::string& name);
// The names of every row, for messages and docs.
std::string gguf_architecture_names();

// Metadata -> config: the architecture's keys (the common ones are read by gguf_model_config).
void read_gguf_features(const GgufArchitecture& arch, const formats::GgufFile& file, nn::CausalTransformerConfig& c);
// Config -> metadata, the inverse; refuse_gguf_features has checked that the row expresses `c`.
void write_gguf_features(const GgufArchitecture& arch, const nn::CausalTransformerConfig& c, formats::GgufWriter& w);
// Throws naming the config field when the architecture cannot express `c`.
void refuse_gguf_features(const GgufArchitecture& arch, const nn::CausalTransformerConfig& c);

}  // namespace dew::interop
