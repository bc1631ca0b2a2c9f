#pragma once
// A Hugging Face tokenizer.json as its pipeline: added tokens, normalizer, pre-tokenizer, model, decoder and
// post-processor, each read through its table (normalizer.h, pre_tokenizer_step.h, token_model.h,
// token_decoder.h, post_processor.h). This serves every tokenizer.json the byte-level fast path
// (BpeTokenizer) does not: SentencePiece BPE with byte fallback, Unigram, WordPiece, normalizers, Metaspace, ...
//
// encode() follows Hugging Face's order: raw-text added tokens are cut out first; each remaining stretch is
// normalized, normalized added tokens are cut out of it, the rest is pre-tokenized into pieces and each piece
// goes through the model. No special tokens are added; add_special_tokens() applies the post-processor.
// decode() gives each id's token text (an added token's content) to the decoder and joins the result.
//
// decode(encode(x)) == x holds only where the pipeline is lossless (no normalizer that changes x, no unk,
// no pre-tokenizer that drops text); byte-level and byte-fallback vocabularies are lossless on valid UTF-8.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/data/tokenizers/added_vocabulary.h"
#include "dew/data/tokenizers/normalizer.h"
#include "dew/data/tokenizers/post_processor.h"
#include "dew/data/tokenizers/pre_tokenizer_step.h"
#include "dew/data/tokenizers/token_decoder.h"
#include "dew/data/tokenizers/token_model.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

struct TokenizerPipeline {
  NormalizerPtr normalizer;             // null: none
  PreTokenizerStepPtr pre_tokenizer;    // null: the whole stretch is one piece
  TokenModelPtr model;                  // required
  TokenDecoderPtr decoder;              // null: token texts joined by spaces (Hugging Face's default)
  PostProcessorPtr post_processor;      // null: no special tokens added
  std::vector<AddedTokenSpec> added_tokens;
  std::optional<TokenId> eos_id;        // null: the first of </s>, <|endoftext|>, <|end_of_text|>, <|im_end|> present
  std::string json_text;                // the tokenizer.json it came from, written back by save(); "" for GGUF
  std::string post_processor_json;      // its post_processor node ("" when none)
};

class PipelineTokenizer final : public Tokenizer {
 public:
  // Errors (an added token id the model also gives another token, say) name `name`.
  PipelineTokenizer(TokenizerPipeline pipeline, std::string name);

  std::string name() const override { return name_; }
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::optional<TokenId> eos_id() const override { return eos_id_; }
  std::vector<TokenId> encode(std::string_view text, bool allow_special = false) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  // The ids of one encoded text with the tokens the post-processor puts around them (Llama's BOS, BERT's
  // [CLS] ... [SEP]): Hugging Face's encode(text, add_special_tokens=True). Unchanged without one.
  std::vector<TokenId> add_special_tokens(std::vector<TokenId> ids) const;
  // Writes the tokenizer.json it was read from (and tokenizer_config.json naming the EOS); GGUF-made
  // pipelines have no tokenizer.json to write, which is an error that says so.
  std::string save(const std::filesystem::path& dir) const override;
  // No cut is vouched for: normalizers and Metaspace("first") see the whole text.
  std::size_t safe_cut(std::string_view text, std::size_t, std::size_t) const override { return text.size(); }

  const AddedVocabulary& added_vocabulary() const { return added_; }
  const TokenModel& model() const { return *pipeline_.model; }
  const std::string& post_processor_json() const { return pipeline_.post_processor_json; }
  // The id of an added token's content or a vocabulary token's text.
  std::optional<TokenId> token_to_id(std::string_view token) const;

 private:
  void encode_stretch(std::string_view text, bool at_text_start, bool allow_special, std::vector<TokenId>& out) const;

  TokenizerPipeline pipeline_;
  std::string name_;
  AddedVocabulary added_;
  std::int64_t vocab_size_ = 0;
  std::optional<TokenId> eos_id_;
};

// tokenizer.json text -> its pipeline; `path` names the file in errors (an unknown component names its type
// and lists the supported ones).
TokenizerPipeline read_tokenizer_pipeline(std::string_view json_text, const std::string& path);

}  // namespace dew::data
