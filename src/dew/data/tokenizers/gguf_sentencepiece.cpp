// GGUF vocabularies that are not byte-level BPE, as tokenizer pipelines built the way llama.cpp tokenizes
// them (its llm_tokenizer_spm, _ugm, _wpm and the gemma4 BPE): SentencePiece BPE ("llama"), Unigram ("t5"),
// WordPiece ("bert") and gemma4's BPE.
#include "dew/core/error.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"

namespace dew::data {
namespace {

using nlohmann::json;

constexpr std::int64_t kControlToken = 3, kUserDefinedToken = 4;
const std::string kMetaspace = "\xE2\x96\x81";  // ▁

NormalizerPtr normalizer_of(const json& node) {
  return read_normalizer(JsonFields{"(built-in)"}, node, "normalizer");
}

Vocabulary vocabulary_of(const GgufTokenizerMetadata& m) {
  Vocabulary vocab;
  for (std::size_t id = 0; id < m.tokens.size(); ++id) vocab.add(m.tokens[id], static_cast<TokenId>(id));
  return vocab;
}

// Control tokens are special (matched only when special tokens are allowed), user-defined ones always.
std::vector<AddedTokenSpec> added_tokens_of(const GgufTokenizerMetadata& m) {
  std::vector<AddedTokenSpec> out;
  for (std::size_t id = 0; id < m.token_types.size() && id < m.tokens.size(); ++id) {
    std::int64_t type = m.token_types[id];
    if ((type != kControlToken && type != kUserDefinedToken) || m.tokens[id].empty()) continue;
    AddedTokenSpec token;
    token.content = m.tokens[id];
    token.id = static_cast<TokenId>(id);
    token.special = type == kControlToken;
    out.push_back(std::move(token));
  }
  return out;
}

std::vector<float> scores_of(const GgufTokenizerMetadata& m, const std::string& file) {
  if (m.scores.size() != m.tokens.size())
    fail(file, ": metadata 'tokenizer.ggml.scores' has ", m.scores.size(), " entries but tokenizer.ggml.tokens has ",
         m.tokens.size(), "; a SentencePiece vocabulary needs one score per token");
  return m.scores;
}

// llama.cpp's SPM: a space before each stretch of text (add_space_prefix), spaces as ▁, pieces merged by
// score, unknown characters as <0xXX> bytes.
TokenizerPipeline llama_spm(const GgufTokenizerMetadata& m, const std::string& file) {
  TokenizerPipeline p;
  json steps = json::array();
  bool prefix = m.add_space_prefix.value_or(true);
  if (prefix) steps.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
  steps.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}});
  p.normalizer = normalizer_of({{"type", "Sequence"}, {"normalizers", steps}});
  BpeModelOptions options;
  options.byte_fallback = true;
  if (m.unknown_id && static_cast<std::size_t>(*m.unknown_id) < m.tokens.size())
    options.unk_token = m.tokens[static_cast<std::size_t>(*m.unknown_id)];
  p.model = make_scored_bpe_model(vocabulary_of(m), scores_of(m, file), options);
  p.decoder = make_sentencepiece_decoder(prefix);
  return p;
}

// llama.cpp's UGM: the charsmap, extra whitespace removed, a leading ▁, Viterbi over the scored pieces.
TokenizerPipeline t5_unigram(const GgufTokenizerMetadata& m, const std::string& file) {
  TokenizerPipeline p;
  std::vector<NormalizerPtr> steps;
  if (!m.precompiled_charsmap.empty())
    steps.push_back(make_precompiled_normalizer(m.precompiled_charsmap, file + ": tokenizer.ggml.precompiled_charsmap"));
  if (m.remove_extra_whitespaces.value_or(true))
    steps.push_back(normalizer_of({{"type", "Sequence"},
                                   {"normalizers", {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                                                    {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}}}}));
  p.normalizer = make_normalizer_sequence(std::move(steps));
  bool prefix = m.add_space_prefix.value_or(true);
  p.pre_tokenizer = make_metaspace(kMetaspace, prefix ? "always" : "never", true);
  std::vector<std::pair<std::string, double>> pieces;
  std::vector<float> scores = scores_of(m, file);
  for (std::size_t id = 0; id < m.tokens.size(); ++id) pieces.emplace_back(m.tokens[id], scores[id]);
  p.model = make_unigram_model(std::move(pieces), m.unknown_id, false);
  p.decoder = make_sentencepiece_decoder(prefix);
  return p;
}

// llama.cpp's WPM: NFD with accents dropped, lowercase, control characters dropped, split at whitespace and around punctuation and
// CJK; each word is '▁' + word, matched greedily (continuation pieces carry no prefix in GGUF).
TokenizerPipeline bert_wpm(const GgufTokenizerMetadata& m, const std::string& file) {
  TokenizerPipeline p;
  p.normalizer = normalizer_of({{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                                {"strip_accents", true}, {"lowercase", true}});
  p.pre_tokenizer = read_pre_tokenizer_step(JsonFields{"(built-in)"},
                                            {{"type", "Sequence"},
                                             {"pretokenizers", {{{"type", "BertPreTokenizer"}},
                                                                {{"type", "Metaspace"}, {"replacement", kMetaspace},
                                                                 {"prepend_scheme", "always"}, {"split", false}}}}},
                                            "pre_tokenizer");
  if (!m.unknown_id) fail(file, ": metadata 'tokenizer.ggml.unknown_token_id' is missing; a WordPiece vocabulary needs one");
  std::string unk = m.tokens.at(static_cast<std::size_t>(*m.unknown_id));
  p.model = make_wordpiece_model(vocabulary_of(m), unk, "", std::size_t(-1), file);
  p.decoder = make_sentencepiece_decoder(true);
  return p;
}

// gemma4: spaces as ▁, newline runs apart from the rest, BPE by rank over raw UTF-8, <0xXX> byte fallback.
TokenizerPipeline gemma4_bpe(const GgufTokenizerMetadata& m, const std::string& file) {
  TokenizerPipeline p;
  p.normalizer = normalizer_of({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}});
  p.pre_tokenizer = read_pre_tokenizer_step(JsonFields{"(built-in)"},
                                            {{"type", "Split"}, {"pattern", {{"Regex", "[^\\n]+|[\\n]+"}}},
                                             {"behavior", "Isolated"}},
                                            "pre_tokenizer");
  std::vector<std::pair<std::string, std::string>> merges;
  for (std::size_t rank = 0; rank < m.merges.size(); ++rank) {
    const std::string& line = m.merges[rank];
    std::size_t space = line.find(' ', 1);
    if (space == std::string::npos)
      fail(file, ": metadata 'tokenizer.ggml.merges[", rank, "]' is '", line, "'; a merge is two tokens separated by a space");
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  BpeModelOptions options;
  options.byte_fallback = true;
  p.model = make_bpe_model(vocabulary_of(m), merges, options, file);
  p.decoder = make_sentencepiece_decoder(false);
  return p;
}

}  // namespace

std::unique_ptr<Tokenizer> gguf_pipeline_tokenizer(const GgufTokenizerMetadata& m, const std::string& file) {
  if (m.tokens.empty()) fail(file, ": metadata 'tokenizer.ggml.tokens' is empty");
  if (!m.token_types.empty() && m.token_types.size() != m.tokens.size())
    fail(file, ": metadata 'tokenizer.ggml.token_type' has ", m.token_types.size(), " entries but "
         "tokenizer.ggml.tokens has ", m.tokens.size(), "; they must be the same length");
  TokenizerPipeline p;
  if (m.model == "llama") p = llama_spm(m, file);
  else if (m.model == "t5") p = t5_unigram(m, file);
  else if (m.model == "bert") p = bert_wpm(m, file);
  else if (m.model == "gemma4") p = gemma4_bpe(m, file);
  else
    fail(file, ": metadata 'tokenizer.ggml.model' is \"", m.model, "\", which dew does not support (supported: gpt2, "
         "llama, t5, bert, gemma4)");
  p.added_tokens = added_tokens_of(m);
  p.eos_id = m.eos_id;
  std::optional<TokenId> bos = m.add_bos.value_or(m.model == "llama" || m.model == "gemma4") ? m.bos_id : std::nullopt;
  std::optional<TokenId> eos = m.add_eos.value_or(m.model == "t5") ? m.eos_id : std::nullopt;
  p.post_processor = make_bos_eos_processor(bos, eos);
  return std::make_unique<PipelineTokenizer>(std::move(p), file);
}

}  // namespace dew::data
