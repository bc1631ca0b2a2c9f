// Reading tokenizer.json's "model" node: a table of the model types, each a function of the node.
#include "dew/core/error.h"
#include "dew/data/tokenizers/token_model.h"

namespace dew::data {
namespace {

using nlohmann::json;

Vocabulary read_vocab_object(const JsonFields& f, const json& model) {
  const json& vocab = f.object(f.need(model, "vocab", "model.vocab"), "model.vocab");
  Vocabulary out;
  std::size_t max_id = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    max_id = std::max<std::size_t>(max_id, static_cast<std::size_t>(f.id(it.value(), "model.vocab[\"" + it.key() + "\"]")));
  if (max_id >= 2 * vocab.size() + 1024)
    f.fail_at("model.vocab", str("has id ", max_id, " but only ", vocab.size(), " tokens; ids must be nearly dense"));
  for (auto it = vocab.begin(); it != vocab.end(); ++it) out.add(it.key(), it.value().get<TokenId>());
  return out;
}

std::vector<std::pair<std::string, std::string>> read_merges(const JsonFields& f, const json& model) {
  std::vector<std::pair<std::string, std::string>> merges;
  const json* list = f.find(model, "merges");
  if (!list) return merges;
  f.array(*list, "model.merges");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& merge = (*list)[i];
    std::string where = str("model.merges[", i, "]");
    if (merge.is_array() && merge.size() == 2) {
      merges.emplace_back(f.string(merge[0], where + "[0]"), f.string(merge[1], where + "[1]"));
      continue;
    }
    std::string line = f.string(merge, where);
    std::size_t space = line.find(' ', 1);  // the first token may itself be a space only in the pair form
    if (space == std::string::npos || space + 1 >= line.size())
      f.fail_at(where, str("is \"", line, "\"; a merge is \"left right\" or [\"left\", \"right\"]"));
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return merges;
}

TokenModelPtr read_bpe(const JsonFields& f, const json& model) {
  if (double dropout = f.number_or(model, "dropout", 0.0, "model.dropout"); dropout != 0.0)
    f.fail_at("model.dropout", str("is ", dropout, "; BPE dropout makes encoding random, so dew refuses it"));
  BpeModelOptions options;
  if (const json* unk = f.find(model, "unk_token")) options.unk_token = f.string(*unk, "model.unk_token");
  options.fuse_unk = f.boolean_or(model, "fuse_unk", false, "model.fuse_unk");
  options.byte_fallback = f.boolean_or(model, "byte_fallback", false, "model.byte_fallback");
  options.ignore_merges = f.boolean_or(model, "ignore_merges", false, "model.ignore_merges");
  options.continuing_subword_prefix = f.string_or(model, "continuing_subword_prefix", "", "model.continuing_subword_prefix");
  options.end_of_word_suffix = f.string_or(model, "end_of_word_suffix", "", "model.end_of_word_suffix");
  return make_bpe_model(read_vocab_object(f, model), read_merges(f, model), std::move(options), f.path);
}

TokenModelPtr read_unigram(const JsonFields& f, const json& model) {
  const json& vocab = f.array(f.need(model, "vocab", "model.vocab"), "model.vocab");
  std::vector<std::pair<std::string, double>> pieces;
  pieces.reserve(vocab.size());
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    std::string where = str("model.vocab[", i, "]");
    const json& entry = vocab[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[1].is_number())
      f.fail_at(where, str("must be [piece, score], not ", entry.dump().substr(0, 100)));
    pieces.emplace_back(f.string(entry[0], where + "[0]"), entry[1].get<double>());
  }
  std::optional<TokenId> unk;
  if (const json* id = f.find(model, "unk_id")) {
    unk = f.id(*id, "model.unk_id");
    if (static_cast<std::size_t>(*unk) >= pieces.size())
      f.fail_at("model.unk_id", str("is ", *unk, ", outside the ", pieces.size(), " pieces of model.vocab"));
  }
  return make_unigram_model(std::move(pieces), unk, f.boolean_or(model, "byte_fallback", false, "model.byte_fallback"));
}

TokenModelPtr read_wordpiece(const JsonFields& f, const json& model) {
  std::int64_t max_chars = f.integer_or(model, "max_input_chars_per_word", 100, "model.max_input_chars_per_word");
  return make_wordpiece_model(read_vocab_object(f, model), f.string_or(model, "unk_token", "[UNK]", "model.unk_token"),
                              f.string_or(model, "continuing_subword_prefix", "##", "model.continuing_subword_prefix"),
                              static_cast<std::size_t>(std::max<std::int64_t>(max_chars, 0)), f.path);
}

TokenModelPtr read_wordlevel(const JsonFields& f, const json& model) {
  return make_wordlevel_model(read_vocab_object(f, model), f.string_or(model, "unk_token", "<unk>", "model.unk_token"),
                              f.path);
}

struct Row {
  const char* type;
  TokenModelPtr (*read)(const JsonFields&, const json&);
};
constexpr Row kModels[] = {{"BPE", read_bpe}, {"Unigram", read_unigram}, {"WordPiece", read_wordpiece},
                           {"WordLevel", read_wordlevel}};

}  // namespace

TokenModelPtr read_token_model(const JsonFields& f, const json& model) {
  f.object(model, "model");
  // Old files leave out "type": a model with merges is BPE.
  std::string type = f.find(model, "type") ? f.type(model, "model") : f.find(model, "merges") ? "BPE" : "";
  std::vector<std::string> names;
  for (const Row& row : kModels) {
    if (type == row.type) return row.read(f, model);
    names.emplace_back(row.type);
  }
  f.unknown_type("model", type, names);
}

}  // namespace dew::data
