#pragma once
// A decoder stored as a GGUF file (llama.cpp's format) loaded as a dew CausalTransformer with the tokenizer
// and chat template from the file's metadata. Architectures (general.architecture):
//   llama   Llama 1/2/3 layout, SmolLM/SmolLM2, Mistral as llama.cpp writes it; the Q/K rows that llama.cpp's
//           converter permuted (rotate-half -> interleaved pairs) are put back in Hugging Face's order
//   qwen2   q/k/v biases
//   qwen3   RMSNorm on each head's queries and keys
// Any other architecture is refused naming general.architecture. Quantized tensors are dequantized
// (formats/gguf.h) to `dtype`; the model computes in that dtype. The model comes back in eval mode on the CPU.
// With WeightFormat::native (nn/quantized/quantized_weights.h) the matrices stored as Q8_0, Q4_0, Q4_1,
// Q4_K or BF16 stay in their blocks (nn::QuantizedMatrix; the model computes in float32 and is for
// inference only); with WeightFormat::bfloat16 every matrix is held as bf16.
//
// Configuration from metadata, ARCH = general.architecture:
//   ARCH.embedding_length -> emb_features        ARCH.block_count -> num_layers
//   ARCH.feed_forward_length -> mlp_features     ARCH.attention.head_count(_kv) -> num_heads, num_kv_heads
//   ARCH.attention.key_length -> head_dim (default embedding_length / head_count)
//   ARCH.rope.freq_base -> rope_theta (default 10000)   ARCH.context_length -> max_seq_len
//   ARCH.attention.layer_norm_rms_epsilon -> norm_eps   vocab_size = number of tokenizer.ggml.tokens
//   tie_embeddings when the file has no output.weight
// Refused by name: rotary over part of a head (rope.dimension_count != head_dim), rope scaling
// (rope.scaling.type other than none, a rope_freqs tensor), mixture-of-experts (expert_count > 0).
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <string>

#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "dew/formats/gguf_file.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/quantized_weights.h"

namespace dew::interop {

struct GgufModel {
  nn::CausalTransformer model{nullptr};
  data::PretrainedTokenizer tokenizer;
  std::string architecture;  // general.architecture: "llama", "qwen2" or "qwen3"
};

GgufModel load_gguf_model(const std::filesystem::path& file, c10::ScalarType dtype = c10::ScalarType::Float);
// The weights held as `weights` says (float32: the overload above with float32).
GgufModel load_gguf_model(const std::filesystem::path& file, nn::WeightFormat weights);

// The pieces, for callers that hold an open file (and tests).
// The CausalTransformer config the metadata describes, with dtype and param_dtype set to `dtype`.
nn::CausalTransformerConfig gguf_model_config(const formats::GgufFile& file, c10::ScalarType dtype);
// The tokenizer (data/tokenizers/gguf_tokenizer.h) from the file's tokenizer.* metadata.
data::PretrainedTokenizer gguf_file_tokenizer(const formats::GgufFile& file);
// The GGUF tensor that holds a CausalTransformer parameter ("model.layers.3.self_attn.q_proj.weight" ->
// "blk.3.attn_q.weight"); an error for a name with no GGUF counterpart.
std::string gguf_tensor_name(const std::string& parameter);
// Copies every parameter of `model` from `file` (dequantized, Q/K order restored for llama). A tensor the
// model needs that the file lacks, a shape that disagrees, or a tensor in the file that the model has no
// place for: errors naming the file and the tensor. With `keep_quantized`, 2-d tensors of a type the
// quantized kernels take are held as nn::QuantizedMatrix (their bytes copied as the file has them, Q/K
// rows reordered) instead of being dequantized.
void load_gguf_weights(nn::CausalTransformerImpl& model, const formats::GgufFile& file,
                       const std::string& architecture, bool keep_quantized = false);

}  // namespace dew::interop
