#pragma once
// The tokenizer a GGUF file describes in its metadata (llama.cpp's tokenizer.* keys), as a
// PretrainedTokenizer. Only byte-level BPE (tokenizer.ggml.model "gpt2": GPT-2, SmolLM/SmolLM2, Llama 3,
// Qwen 2/3) is supported; SentencePiece ("llama"), T5 and others are refused by name.
//
// The metadata comes in as plain values (interop/ reads them out of the file), so this layer needs
// neither the GGUF reader nor LibTorch:
//   tokens        tokenizer.ggml.tokens, in GPT-2's byte-level text, as tokenizer.json spells them
//   token_types   tokenizer.ggml.token_type: 3 (control) tokens become special added tokens, matched in
//                 text only when special tokens are allowed; 4 (user-defined) become plain added tokens,
//                 always matched whole (llama.cpp's rule, and transformers')
//   merges        tokenizer.ggml.merges, "left right" in rank order
//   pre           tokenizer.ggml.pre: which pre-tokenizer regexes the vocabulary was trained with
//                 (gguf_pre_tokenizer below lists the names known)
//   ids           bos/eos/unknown/padding/eot/eom token ids; add_bos_token; chat_template
#include <optional>
#include <string>
#include <vector>

#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/pretrained_tokenizer.h"

namespace dew::data {

struct GgufTokenizerMetadata {
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre; "" when absent
  std::vector<std::string> tokens;
  std::vector<std::int64_t> token_types;  // empty when absent: every token normal
  std::vector<std::string> merges;
  std::optional<TokenId> bos_id, eos_id, unknown_id, pad_id, eot_id, eom_id;
  std::optional<bool> add_bos;  // tokenizer.ggml.add_bos_token
  std::optional<std::string> chat_template;
  std::optional<long long> context_length;  // {arch}.context_length, reported as model_max_length
};

// The pre-tokenizer of a tokenizer.ggml.pre name, as llama.cpp defines it:
//   gpt2                                     GPT-2's regex
//   smollm, starcoder, refact, codeshell     one piece per digit, then GPT-2's regex
//   qwen2, deepseek-r1-qwen, stablelm2       Qwen 2's regex (digits one by one)
//   llama-bpe, llama3, llama-v3, smaug-bpe, falcon3   Llama 3's regex, whole-token pieces not merged
// Any other name is an error naming `file`, the value and the supported names.
struct GgufPreTokenizer {
  std::vector<std::string> split_patterns;
  bool ignore_merges = false;
  bool add_bos_default = false;  // llama.cpp adds BOS for Llama 3 vocabularies that do not say otherwise
};
GgufPreTokenizer gguf_pre_tokenizer(const std::string& pre, const std::string& file);

// The byte-level BPE alone. Errors (dew::Error) name `file` and the metadata key at fault: an unsupported
// tokenizer.ggml.model or .pre, token_type of another length than tokens, a merge that is not two tokens,
// ids outside the vocabulary.
std::unique_ptr<BpeTokenizer> gguf_bpe_tokenizer(const GgufTokenizerMetadata& metadata, const std::string& file);

// The whole tokenizer: BPE, BOS/EOS/pad ids and their text, add_bos, stop ids (EOS, then end-of-turn and
// end-of-message ids when the file names them), the chat template (parsed now; a syntax error names
// `file` and tokenizer.chat_template).
PretrainedTokenizer gguf_pretrained_tokenizer(const GgufTokenizerMetadata& metadata, const std::string& file);

}  // namespace dew::data
