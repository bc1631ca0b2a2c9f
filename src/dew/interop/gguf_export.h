#pragma once
// A dew decoder and its byte-level BPE tokenizer written as a GGUF v3 file, laid out as llama.cpp's
// convert_hf_to_gguf.py writes the same model for one of the architectures of gguf_architecture.h (llama,
// qwen2, qwen3, gemma, gemma2, gemma3, phi3, gpt2, gptneox, olmo2, granite), so llama.cpp, gguf-py,
// transformers' GGUF loading and dew's own load_gguf_model (gguf_model.h) read it.
//
// Metadata (ARCH = the architecture):
//   general.architecture, general.name, general.file_type (0 all F32, 1 mostly F16, 7 mostly Q8_0),
//   general.quantization_version (2)
//   ARCH.vocab_size, context_length (max_seq_len), embedding_length, block_count, feed_forward_length,
//   attention.head_count, attention.head_count_kv, attention.key_length / value_length (only when
//   head_dim != embedding_length / head_count), and the row's keys (write_gguf_features: norm epsilon,
//   rotary, softcaps, sliding windows, parallel residual, Granite's scales)
//   tokenizer.ggml.model "gpt2", tokenizer.ggml.pre (inferred from the pre-tokenizer regexes: gpt2, smollm,
//   qwen2 or llama-bpe; GgufExportOptions::tokenizer_pre overrides), tokens (byte-level text; added tokens
//   as their content), token_type (1 normal, 3 control = special added token, 4 user-defined = other
//   added token, 5 unused id "[PAD<id>]"), merges "left right", bos/eos/padding ids, eot/eom ids (the 2nd
//   and 3rd stop ids), add_bos_token, tokenizer.chat_template. The vocabulary is padded to the model's
//   vocab_size with unused ids, as the converter does.
// Tensors under llama.cpp's names (gguf_model_tensors): 2-D weights in the requested type, Q8_0 falling back
// to F16 for a row length that is not a multiple of 32 (gguf-py's rule); norms and other 1-D tensors
// always F32. Fused, permuted and shifted as the architecture's converter writes them.
//
// Refused by field name, before anything is written: an architecture without a row, what the row cannot
// express (refuse_gguf_features), a tokenizer that is not a BpeTokenizer (the byte tokenizer has no GPT-2
// byte-level vocabulary llama.cpp would pre-tokenize the same way), a pre-tokenizer no llama.cpp name
// describes, a tokenizer larger than the model's vocabulary.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "dew/formats/gguf_file.h"
#include "dew/formats/gguf_writer.h"
#include "dew/interop/gguf_architecture.h"
#include "dew/nn/causal_transformer.h"

namespace dew::interop {

struct GgufExportOptions {
  std::string name = "dew";  // general.name
  std::string tokenizer_pre;  // tokenizer.ggml.pre; "" = inferred from the tokenizer's regexes
};

// Writes `file` atomically. `architecture` is a row's name or the Hugging Face model_type the converter
// writes as it (gguf_export_architecture); `type` F32, F16 or Q8_0.
void save_gguf_model(const nn::CausalTransformer& model, const data::PretrainedTokenizer& tokenizer,
                     const std::string& architecture, const std::filesystem::path& file, formats::GgmlType type,
                     const GgufExportOptions& options = {});

// The pieces, for tests and callers that add their own keys before writing.
// Throws naming the field when `architecture` cannot express `config`.
void check_gguf_exportable(const nn::CausalTransformerConfig& config, const std::string& architecture);
// The model's general.* and ARCH.* metadata and tensors.
void add_gguf_model(formats::GgufWriter& writer, const nn::CausalTransformerImpl& model,
                    const std::string& architecture, formats::GgmlType type, const std::string& name);
// The model's tensors under their GGUF names, as the architecture's converter writes them: q/k/v and
// phi3's gate/up fused, llama/granite Q/K rows permuted, gemma's norms + 1, olmo2's output.weight even when
// tied, qwen2's zero q/k/v biases when the model has none.
std::vector<std::pair<std::string, at::Tensor>> gguf_model_tensors(const nn::CausalTransformerImpl& model,
                                                                   const GgufArchitecture& architecture);
// The tokenizer.* metadata, the vocabulary padded to `vocab_size`.
void add_gguf_tokenizer(formats::GgufWriter& writer, const data::PretrainedTokenizer& tokenizer,
                        std::int64_t vocab_size, const std::string& pre = "");

}  // namespace dew::interop
