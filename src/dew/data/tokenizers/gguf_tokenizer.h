#pragma once
// The tokenizer a GGUF file describes in its metadata (llama.cpp's tokenizer.* keys), as a
// PretrainedTokenizer. tokenizer.ggml.model:
//   gpt2    byte-level BPE (GPT-2, SmolLM, Llama 3, Qwen 2/3, DeepSeek, Falcon, StarCoder, Command-R, ...), with
//           the regex set of its tokenizer.ggml.pre (gguf_pre_tokenizers.cpp); the BpeTokenizer fast path
//   llama   SentencePiece BPE: pieces merged by score, byte fallback, ' ' -> '▁', a '▁' before each stretch of
//           text when tokenizer.ggml.add_space_prefix (default true) (gguf_sentencepiece.cpp)
//   t5      SentencePiece Unigram with tokenizer.ggml.precompiled_charsmap
//   bert    WordPiece as llama.cpp stores it: word-initial pieces start with '▁', continuations are bare
//   gemma4  BPE over raw UTF-8 with ' ' -> '▁' and <0xXX> byte fallback
// Anything else is refused by name.
//
// The metadata comes in as plain values (gguf_tokenizer_metadata reads them out of a GgufFile, which needs
// no LibTorch):
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
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/data/tokenizers/pretrained_tokenizer.h"

namespace dew::data {

struct GgufTokenizerMetadata {
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre; "" when absent
  std::vector<std::string> tokens;
  std::vector<std::int64_t> token_types;  // empty when absent: every token normal
  std::vector<std::string> merges;
  std::optional<TokenId> bos_id, eos_id, unknown_id, pad_id, eot_id, eom_id;
  std::vector<float> scores;               // tokenizer.ggml.scores (llama, t5)
  std::string precompiled_charsmap;        // tokenizer.ggml.precompiled_charsmap (t5), raw bytes
  std::optional<bool> add_bos;  // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;  // tokenizer.ggml.add_eos_token
  std::optional<bool> add_space_prefix;          // tokenizer.ggml.add_space_prefix
  std::optional<bool> remove_extra_whitespaces;  // tokenizer.ggml.remove_extra_whitespaces
  std::optional<std::string> chat_template;
  std::optional<long long> context_length;  // {arch}.context_length, reported as model_max_length
};

// The pre-tokenizer of a tokenizer.ggml.pre name, as llama.cpp defines it (the table in
// gguf_pre_tokenizers.cpp: gpt-2, llama-bpe/llama3, qwen2, qwen35, deepseek-llm, deepseek-coder, falcon,
// starcoder, refact, command-r, smollm, olmo, mpt, phi-2, dbrx, smaug-bpe, chatglm-bpe, glm4, tekken, gpt-4o,
// bloom, viking, default, ...). Any other name is an error naming `file`, the value and the supported names.
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

// The SentencePiece, Unigram, WordPiece and gemma4 vocabularies as a tokenizer pipeline (pipeline_tokenizer.h).
std::unique_ptr<Tokenizer> gguf_pipeline_tokenizer(const GgufTokenizerMetadata& metadata, const std::string& file);

// The whole tokenizer: the model's tokenizer, BOS/EOS/pad ids and their text, add_bos, stop ids (EOS, then end-of-turn and
// end-of-message ids when the file names them), the chat template (parsed now; a syntax error names
// `file` and tokenizer.chat_template).
PretrainedTokenizer gguf_pretrained_tokenizer(const GgufTokenizerMetadata& metadata, const std::string& file);

}  // namespace dew::data

namespace dew::formats {
class GgufFile;
}

namespace dew::data {

// The tokenizer.* metadata of an open GGUF file. Errors name the file and the key.
GgufTokenizerMetadata gguf_tokenizer_metadata(const formats::GgufFile& file);

}  // namespace dew::data
