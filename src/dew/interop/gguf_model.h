#pragma once
// A decoder stored as a GGUF file (llama.cpp's format) loaded as a dew CausalTransformer with the tokenizer
// and chat template from the file's metadata. general.architecture picks a row of gguf_architecture.h:
//   llama    Llama 1/2/3, SmolLM, Mistral as llama.cpp writes them; the Q/K rows the converter permuted
//            (rotate-half -> interleaved pairs) are put back in Hugging Face's order; optional biases
//   qwen2    q/k/v biases                         qwen3    RMSNorm on each head's queries and keys
//   gemma    norms stored as weight + 1 (read back as norm_weight_offset 1), sqrt(n_embd) embedding scale,
//            gelu-tanh gated MLP, tied embeddings
//   gemma2   + sandwich norms, attention and final softcaps, sliding window on every 2nd layer (or the
//            sliding_window_pattern key)            gemma3   + per-head q/k norms, every 6th layer full,
//            the sliding layers' own unscaled base rope.freq_base_swa (default 10000)
//   phi3     fused attn_qkv and ffn_up = [gate; up], partial rotary, one sliding window on every layer
//   gpt2     LayerNorm with biases, learned positions (position_embd), fused attn_qkv, gelu-tanh MLP
//   gptneox  LayerNorm, fused attn_qkv, partial rotary, use_parallel_residual, gelu-tanh MLP (what llama.cpp
//            computes; Pythia's Hugging Face config says exact gelu)
//   olmo2    norms only after each sublayer, q/k norms over the whole projection
//   granite  llama's layout with attention.scale, embedding_scale, residual_scale and logit_scale
// Any other architecture is refused naming general.architecture. Quantized tensors are dequantized
// (formats/gguf.h) to `dtype`; the model computes in that dtype. The model comes back in eval mode on the CPU.
// With WeightFormat::native (nn/quantized/quantized_weights.h) the matrices stored as Q8_0, Q4_0, Q4_1,
// Q4_K or BF16 stay in their blocks (nn::QuantizedMatrix; the model computes in float32 and is for
// inference only), except fused ones (attn_qkv, phi3's ffn_up), which are dequantized and split; with
// WeightFormat::bfloat16 every matrix is held as bf16.
//
// Configuration from metadata, ARCH = general.architecture:
//   ARCH.embedding_length -> emb_features        ARCH.block_count -> num_layers
//   ARCH.feed_forward_length -> mlp_features     ARCH.attention.head_count(_kv) -> num_heads, num_kv_heads
//   ARCH.attention.key_length -> head_dim (default embedding_length / head_count)
//   ARCH.rope.freq_base -> rope_theta (default 10000)   ARCH.context_length -> max_seq_len
//   ARCH.rope.dimension_count -> rotary_dim (phi3, gptneox)   ARCH.rope.scaling.type linear + factor -> rope_scaling
//   ARCH.attention.layer_norm_rms_epsilon (or layer_norm_epsilon for LayerNorm rows) -> norm_eps
//   vocab_size = number of tokenizer.ggml.tokens; tie_embeddings when the file has no output.weight
//   and each row's feature keys (gguf_architecture.cpp read_gguf_features).
// Refused by name: rotary over part of a head outside phi3/gptneox, rope scaling other than linear
// (rope.scaling.type yarn/longrope, rope_freqs or rope_factors_long/short tensors), mixture-of-experts
// (expert_count > 0), sliding windows in a row without them (OLMo 3).
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "dew/formats/gguf_file.h"
#include "dew/interop/gguf_architecture.h"
#include "dew/interop/hf_tensor_layout.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/quantized_weights.h"

namespace dew::interop {

struct GgufModel {
  nn::CausalTransformer model{nullptr};
  data::PretrainedTokenizer tokenizer;
  std::string architecture;  // general.architecture: a row of gguf_architecture.h
  std::string hf_model_type;  // the Hugging Face model_type the converter reads as it (gemma3 -> gemma3_text)
};

GgufModel load_gguf_model(const std::filesystem::path& file, c10::ScalarType dtype = c10::ScalarType::Float);
// The weights held as `weights` says (float32: the overload above with float32).
GgufModel load_gguf_model(const std::filesystem::path& file, nn::WeightFormat weights);

// The pieces, for callers that hold an open file (and tests).
// The CausalTransformer config the metadata describes, with dtype and param_dtype set to `dtype`.
nn::CausalTransformerConfig gguf_model_config(const formats::GgufFile& file, c10::ScalarType dtype);
// The tokenizer (data/tokenizers/gguf_tokenizer.h) from the file's tokenizer.* metadata.
data::PretrainedTokenizer gguf_file_tokenizer(const formats::GgufFile& file);
// The GGUF tensor that holds a CausalTransformer parameter in a llama-layout file
// ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"); an error for a name with no GGUF
// counterpart. `sandwich`: post_attention_layernorm is the norm after attention (blk.N.post_attention_norm),
// pre/post_feedforward_layernorm are blk.N.ffn_norm / blk.N.post_ffw_norm (gemma2, gemma3, olmo2).
// Fused tensors (attn_qkv, phi3's ffn_up) are gguf_tensor_layout's.
std::string gguf_tensor_name(const std::string& parameter, bool sandwich = false);
// Every GGUF tensor of a model with these parameters (parameter_map's names) under `architecture`: its
// name and the parameters it holds (several for the fused ones, stacked along rows).
std::vector<StoredTensor> gguf_tensor_layout(const GgufArchitecture& architecture,
                                             const std::vector<std::string>& parameters);
// The row of general.architecture; an error naming the file and the value for an architecture dew lacks.
const GgufArchitecture& gguf_file_architecture(const formats::GgufFile& file);
// Copies every parameter of `model` from `file` (dequantized, fused tensors split, Q/K order restored for
// llama and granite, gemma's + 1 taken off the norms). A tensor the
// model needs that the file lacks, a shape that disagrees, or a tensor in the file that the model has no
// place for: errors naming the file and the tensor. With `keep_quantized`, 2-d tensors of a type the
// quantized kernels take are held as nn::QuantizedMatrix (their bytes copied as the file has them, Q/K
// rows reordered) instead of being dequantized.
void load_gguf_weights(nn::CausalTransformerImpl& model, const formats::GgufFile& file,
                       const std::string& architecture, bool keep_quantized = false);

}  // namespace dew::interop
