#include "dew/data/tokenizers/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "dew/core/error.h"

namespace dew::data {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

json parse_json(std::string_view text, const std::string& path) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

// Field access that names the file and the field in every error.
struct Fields {
  const std::string& path;

  const json* find(const json& object, const char* key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }
  const json& need(const json& object, const char* key, const std::string& where) const {
    const json* value = find(object, key);
    if (!value) fail(path, ": field '", where, "' is missing");
    return *value;
  }
  const json& object(const json& value, const std::string& where) const {
    if (!value.is_object()) fail(path, ": field '", where, "' must be an object, not ", value.type_name());
    return value;
  }
  const json& array(const json& value, const std::string& where) const {
    if (!value.is_array()) fail(path, ": field '", where, "' must be an array, not ", value.type_name());
    return value;
  }
  std::string string(const json& value, const std::string& where) const {
    if (!value.is_string()) fail(path, ": field '", where, "' must be a string, not ", value.type_name());
    return value.get<std::string>();
  }
  bool boolean(const json& object, const char* key, bool fallback, const std::string& where) const {
    const json* value = find(object, key);
    if (!value || value->is_null()) return fallback;
    if (!value->is_boolean()) fail(path, ": field '", where, "' must be true or false, not ", value->dump());
    return value->get<bool>();
  }
  TokenId id(const json& value, const std::string& where) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > INT32_MAX)
      fail(path, ": field '", where, "' must be a token id (an integer from 0 to 2147483647), not ", value.dump());
    return static_cast<TokenId>(value.get<std::int64_t>());
  }
  // A field that must be absent, null, or one accepted value, since any other would change the ids.
  void refuse_unless(const json& object, const char* key, const std::string& where, const json& accepted,
                     const char* why) const {
    const json* value = find(object, key);
    if (value && !value->is_null() && *value != accepted)
      fail(path, ": field '", where, "' is ", value->dump(), ", which is not supported: ", why);
  }
};

std::string regex_for_literal(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// Appends the regexes of one pre-tokenizer; byte_level records that the ByteLevel step was seen.
void read_pre_tokenizer(const Fields& f, const json& node, const std::string& where, std::vector<std::string>& patterns,
                        bool& byte_level, int depth = 0) {
  f.object(node, where);
  if (depth > 8) fail(f.path, ": field '", where, "' nests Sequence pre-tokenizers more than 8 deep");
  std::string type = f.string(f.need(node, "type", where + ".type"), where + ".type");
  if (byte_level)
    fail(f.path, ": field '", where, "' (", type, ") comes after the ByteLevel step, so it would split byte-level "
         "text; only Split and Digits before a final ByteLevel are supported");
  if (type == "Sequence") {
    const json& steps = f.array(f.need(node, "pretokenizers", where + ".pretokenizers"), where + ".pretokenizers");
    for (std::size_t i = 0; i < steps.size(); ++i)
      read_pre_tokenizer(f, steps[i], dew::str(where, ".pretokenizers[", i, "]"), patterns, byte_level, depth + 1);
  } else if (type == "ByteLevel") {
    f.refuse_unless(node, "add_prefix_space", where + ".add_prefix_space", false,
                    "a prefix space would make decode(encode(x)) differ from x");
    if (f.boolean(node, "use_regex", true, where + ".use_regex")) patterns.emplace_back(kGpt2Pattern);
    byte_level = true;
  } else if (type == "Split") {
    const json& pattern = f.object(f.need(node, "pattern", where + ".pattern"), where + ".pattern");
    if (const json* regex = f.find(pattern, "Regex")) patterns.push_back(f.string(*regex, where + ".pattern.Regex"));
    else if (const json* literal = f.find(pattern, "String"))
      patterns.push_back(regex_for_literal(f.string(*literal, where + ".pattern.String")));
    else fail(f.path, ": field '", where, ".pattern' must hold \"Regex\" or \"String\"");
    f.refuse_unless(node, "behavior", where + ".behavior", "Isolated", "only behavior \"Isolated\" is supported");
    f.refuse_unless(node, "invert", where + ".invert", false, "an inverted split is not supported");
  } else if (type == "Digits") {
    bool each = f.boolean(node, "individual_digits", false, where + ".individual_digits");
    patterns.emplace_back(each ? kEachDigitPattern : kDigitRunPattern);
  } else {
    fail(f.path, ": field '", where, ".type' is \"", type, "\", which is not supported (ByteLevel, Sequence, Split, "
         "Digits are)");
  }
}

// Vocabulary ids must be fairly dense: a file cannot make us allocate billions of empty slots.
void check_dense(const Fields& f, std::size_t max_id, std::size_t tokens, const std::string& where) {
  if (max_id >= 2 * tokens + 1024)
    fail(f.path, ": field '", where, "' has id ", max_id, " but only ", tokens, " tokens; ids must be nearly dense");
}

std::vector<std::string> read_vocab(const Fields& f, const json& vocab_node, std::size_t extra_tokens) {
  f.object(vocab_node, "model.vocab");
  std::size_t max_id = 0;
  for (auto it = vocab_node.begin(); it != vocab_node.end(); ++it) {
    TokenId id = f.id(it.value(), "model.vocab[\"" + it.key() + "\"]");
    if (it.key().empty()) fail(f.path, ": field 'model.vocab' has an empty token (id ", id, ")");
    max_id = std::max<std::size_t>(max_id, static_cast<std::size_t>(id));
  }
  if (vocab_node.empty()) fail(f.path, ": field 'model.vocab' is empty");
  check_dense(f, max_id, vocab_node.size() + extra_tokens, "model.vocab");
  std::vector<std::string> vocab(max_id + 1);
  for (auto it = vocab_node.begin(); it != vocab_node.end(); ++it) {
    std::string& slot = vocab[it.value().get<std::size_t>()];
    if (!slot.empty())
      fail(f.path, ": field 'model.vocab' gives id ", it.value().get<std::size_t>(), " to both '", slot, "' and '",
           it.key(), "'");
    slot = it.key();
  }
  return vocab;
}

std::pair<std::string, std::string> split_merge_line(const Fields& f, std::string_view line, const std::string& where) {
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos || space == 0 ||
      space + 1 == line.size())
    fail(f.path, ": ", where, " is '", line, "'; a merge is two tokens separated by one space");
  return {std::string(line.substr(0, space)), std::string(line.substr(space + 1))};
}

// The "model" section: a byte-level BPE's vocabulary (beside `added_count` added tokens) and its merges.
void read_bpe_model(const Fields& f, const json& model, std::size_t added_count, BpeDefinition& definition) {
  if (const json* type = f.find(model, "type")) {
    std::string name = f.string(*type, "model.type");
    if (name != "BPE")
      fail(f.path, ": field 'model.type' is \"", name, "\"; only BPE (byte-level) tokenizers are supported");
  } else if (!f.find(model, "merges")) {
    fail(f.path, ": field 'model.type' is missing and the model has no merges; only BPE tokenizers are supported");
  }
  f.refuse_unless(model, "dropout", "model.dropout", 0.0, "BPE dropout makes encoding random");
  f.refuse_unless(model, "continuing_subword_prefix", "model.continuing_subword_prefix", "",
                  "byte-level BPE has no subword prefix");
  f.refuse_unless(model, "end_of_word_suffix", "model.end_of_word_suffix", "", "byte-level BPE has no word suffix");
  f.refuse_unless(model, "byte_fallback", "model.byte_fallback", false, "byte fallback belongs to SentencePiece BPE");
  definition.ignore_merges = f.boolean(model, "ignore_merges", false, "model.ignore_merges");

  definition.vocab = read_vocab(f, f.need(model, "vocab", "model.vocab"), added_count);

  const json& merges = f.array(f.need(model, "merges", "model.merges"), "model.merges");
  definition.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    std::string where = dew::str("model.merges[", i, "]");
    const json& merge = merges[i];
    if (merge.is_string()) {
      definition.merges.push_back(split_merge_line(f, merge.get_ref<const std::string&>(), "field '" + where + "'"));
    } else if (merge.is_array() && merge.size() == 2) {
      definition.merges.emplace_back(f.string(merge[0], where + "[0]"), f.string(merge[1], where + "[1]"));
    } else {
      fail(f.path, ": field '", where, "' must be \"a b\" or [\"a\", \"b\"], not ", merge.dump());
    }
  }
}

// The "added_tokens" list: special and added tokens with ids near the vocabulary's.
void read_added_tokens(const Fields& f, const json& added_node, BpeDefinition& definition) {
  f.array(added_node, "added_tokens");
  for (std::size_t i = 0; i < added_node.size(); ++i) {
    std::string where = dew::str("added_tokens[", i, "]");
    const json& node = f.object(added_node[i], where);
    AddedToken added{f.string(f.need(node, "content", where + ".content"), where + ".content"),
                     f.id(f.need(node, "id", where + ".id"), where + ".id"),
                     f.boolean(node, "special", false, where + ".special")};
    for (const char* key : {"lstrip", "rstrip", "single_word"})
      if (f.boolean(node, key, false, where + "." + key))
        fail(f.path, ": field '", where, ".", key, "' is true for '", added.content,
             "'; added tokens that absorb neighbouring spaces or need word boundaries are not supported");
    check_dense(f, static_cast<std::size_t>(added.id), definition.vocab.size() + added_node.size(), where + ".id");
    definition.added_tokens.push_back(std::move(added));
  }
}

}  // namespace

BpeDefinition parse_tokenizer_json(std::string_view json_text, const std::string& path) {
  Fields f{path};
  json root = parse_json(json_text, path);
  f.object(root, "(top level)");
  BpeDefinition definition;

  const json* added_node = f.find(root, "added_tokens");
  std::size_t added_count = added_node && added_node->is_array() ? added_node->size() : 0;
  read_bpe_model(f, f.object(f.need(root, "model", "model"), "model"), added_count, definition);
  if (added_node && !added_node->is_null()) read_added_tokens(f, *added_node, definition);

  if (const json* normalizer = f.find(root, "normalizer"); normalizer && !normalizer->is_null()) {
    bool empty_sequence = normalizer->is_object() && normalizer->value("type", json()) == "Sequence" &&
                          normalizer->value("normalizers", json::array()).empty();
    if (!empty_sequence)
      fail(path, ": field 'normalizer' is ", normalizer->dump().substr(0, 200),
           "; normalizers (NFC and others) are not supported, only null");
  }

  const json& pre = f.need(root, "pre_tokenizer", "pre_tokenizer");
  if (pre.is_null()) fail(path, ": field 'pre_tokenizer' is null; a byte-level BPE needs a ByteLevel pre-tokenizer");
  definition.split_patterns.clear();
  bool byte_level = false;
  read_pre_tokenizer(f, pre, "pre_tokenizer", definition.split_patterns, byte_level);
  if (!byte_level)
    fail(path, ": field 'pre_tokenizer' has no ByteLevel step; only byte-level BPE tokenizers are supported");
  definition.pre_tokenizer_json = pre.dump();

  const json& decoder = f.need(root, "decoder", "decoder");
  if (!decoder.is_object() || decoder.value("type", json()) != "ByteLevel")
    fail(path, ": field 'decoder' is ", decoder.dump().substr(0, 200), "; only the ByteLevel decoder is supported");
  definition.decoder_json = decoder.dump();
  if (const json* post = f.find(root, "post_processor"); post && !post->is_null())
    definition.post_processor_json = post->dump();
  return definition;
}

std::optional<std::string> parse_eos_token(std::string_view json_text, const std::string& path) {
  Fields f{path};
  json root = parse_json(json_text, path);
  f.object(root, "(top level)");
  const json* eos = f.find(root, "eos_token");
  if (!eos || eos->is_null()) return std::nullopt;
  if (eos->is_object()) return f.string(f.need(*eos, "content", "eos_token.content"), "eos_token.content");
  return f.string(*eos, "eos_token");
}

BpeDefinition parse_gpt2_files(std::string_view encoder_json, std::string_view vocab_bpe, const std::string& dir) {
  std::string encoder_path = dir + "/encoder.json", merges_path = dir + "/vocab.bpe";
  Fields f{encoder_path};
  BpeDefinition definition;
  definition.vocab = read_vocab(f, parse_json(encoder_json, encoder_path), 0);
  Fields m{merges_path};
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < vocab_bpe.size();) {
    std::size_t end = vocab_bpe.find('\n', start);
    if (end == std::string_view::npos) end = vocab_bpe.size();
    std::string_view line = vocab_bpe.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_number;
    start = end + 1;
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    definition.merges.push_back(split_merge_line(m, line, dew::str("line ", line_number)));
  }
  for (std::size_t id = 0; id < definition.vocab.size(); ++id)
    if (definition.vocab[id] == "<|endoftext|>")
      definition.added_tokens.push_back(AddedToken{"<|endoftext|>", static_cast<TokenId>(id), true});
  return definition;
}

namespace {
std::string write_json(const BpeDefinition& definition);
}  // namespace

TokenId resolve_token(const BpeDefinition& definition, const std::string& token, const std::string& where) {
  for (const AddedToken& added : definition.added_tokens)
    if (added.content == token) return added.id;
  for (std::size_t id = 0; id < definition.vocab.size(); ++id)
    if (definition.vocab[id] == token) return static_cast<TokenId>(id);
  fail(where, ": '", token, "' is neither an added token nor a vocabulary token");
}

std::string write_tokenizer_json(const BpeDefinition& definition) {
  try {
    return write_json(definition);
  } catch (const ordered_json::exception& e) {  // an added token that is not UTF-8, say
    fail("cannot write tokenizer.json: ", e.what());
  }
}

namespace {
std::string write_json(const BpeDefinition& definition) {
  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  ordered_json added = ordered_json::array();
  for (const AddedToken& token : definition.added_tokens)
    added.push_back({{"id", token.id}, {"content", token.content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", token.special}});
  root["added_tokens"] = added;
  root["normalizer"] = nullptr;
  if (!definition.pre_tokenizer_json.empty()) {
    root["pre_tokenizer"] = ordered_json::parse(definition.pre_tokenizer_json);
  } else {
    const auto& patterns = definition.split_patterns;
    ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    if (patterns.size() == 1 && patterns[0] == kGpt2Pattern) {
      root["pre_tokenizer"] = byte_level;
    } else {
      ordered_json steps = ordered_json::array();
      for (const std::string& pattern : patterns)
        steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}});
      byte_level["use_regex"] = false;
      steps.push_back(byte_level);
      root["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
    }
  }
  root["post_processor"] =
      definition.post_processor_json.empty() ? ordered_json(nullptr) : ordered_json::parse(definition.post_processor_json);
  root["decoder"] = definition.decoder_json.empty()
                        ? ordered_json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}
                        : ordered_json::parse(definition.decoder_json);
  ordered_json model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                        {"byte_fallback", false}, {"ignore_merges", definition.ignore_merges}};
  // ordered_json's operator[] searches linearly, which makes a 50k vocabulary quadratic (seconds).
  // Tokens are unique, so append to the underlying vector directly.
  ordered_json vocab = ordered_json::object();
  auto& entries = static_cast<std::vector<std::pair<const std::string, ordered_json>>&>(vocab.get_ref<ordered_json::object_t&>());
  entries.reserve(definition.vocab.size());
  for (std::size_t id = 0; id < definition.vocab.size(); ++id)
    if (!definition.vocab[id].empty()) entries.emplace_back(definition.vocab[id], id);
  model["vocab"] = std::move(vocab);
  // "a b" lines are the form every tokenizers version reads; pairs only when a token holds a space.
  bool pairs = false;
  for (const auto& [left, right] : definition.merges)
    pairs = pairs || left.find(' ') != std::string::npos || right.find(' ') != std::string::npos;
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : definition.merges) {
    if (pairs) merges.push_back(ordered_json::array({left, right}));
    else merges.push_back(left + " " + right);
  }
  model["merges"] = std::move(merges);
  root["model"] = std::move(model);
  return root.dump(2, ' ', false, ordered_json::error_handler_t::strict) + "\n";
}
}  // namespace

std::string write_tokenizer_config_json(const BpeDefinition& definition, std::optional<TokenId> eos_id) {
  ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}};
  if (eos_id) {
    std::string token;
    for (const AddedToken& added : definition.added_tokens)
      if (added.id == *eos_id) token = added.content;
    if (token.empty()) token = definition.vocab.at(static_cast<std::size_t>(*eos_id));
    config["eos_token"] = token;
  }
  return config.dump(2) + "\n";
}

}  // namespace dew::data
