// The tokenizer.json decoders, one small class per Hugging Face type, and the table that reads them.
#include "dew/core/error.h"
#include "dew/data/tokenizers/component_table.h"
#include "dew/data/tokenizers/byte_level.h"
#include "dew/data/tokenizers/regex_matches.h"
#include "dew/data/tokenizers/token_decoder.h"
#include "dew/data/tokenizers/token_model.h"

namespace dew::data {
namespace {

using nlohmann::json;
using Tokens = std::vector<std::string>;

// "<0x41>" -> 0x41, else -1.
int fallback_byte(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  int high = hex(token[3]), low = hex(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

// Runs of <0xXX> tokens become their bytes. Hugging Face turns a run that is not valid UTF-8 into U+FFFD per
// token; dew keeps the bytes, so that decoding token by token and joining gives the same bytes as decoding
// all at once (dew's Tokenizer::decode promise). For valid UTF-8 the two agree.
class ByteFallback final : public TokenDecoder {
 public:
  Tokens decode_chain(Tokens tokens) const override {
    Tokens out;
    std::string bytes;
    for (std::string& token : tokens) {
      int byte = fallback_byte(token);
      if (byte >= 0) {
        bytes += static_cast<char>(byte);
        continue;
      }
      if (!bytes.empty()) out.push_back(std::move(bytes)), bytes.clear();
      out.push_back(std::move(token));
    }
    if (!bytes.empty()) out.push_back(std::move(bytes));
    return out;
  }
};

class Fuse final : public TokenDecoder {
 public:
  Tokens decode_chain(Tokens tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    return {all};
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class Strip final : public TokenDecoder {
 public:
  Strip(std::string content, std::size_t start, std::size_t stop) : content_(std::move(content)), start_(start), stop_(stop) {}
  Tokens decode_chain(Tokens tokens) const override {
    for (std::string& token : tokens) {
      for (std::size_t i = 0; i < start_ && token.starts_with(content_); ++i) token.erase(0, content_.size());
      for (std::size_t i = 0; i < stop_ && token.ends_with(content_); ++i) token.resize(token.size() - content_.size());
    }
    return tokens;
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
};

class Replace final : public TokenDecoder {
 public:
  Replace(TextPattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  Tokens decode_chain(Tokens tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
    return tokens;
  }

 private:
  TextPattern pattern_;
  std::string content_;
};

// The replacement character becomes a space; the first token loses its leading space unless the
// pre-tokenizer never prepends one.
class Metaspace final : public TokenDecoder {
 public:
  Metaspace(std::string replacement, bool strip_first) : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  Tokens decode_chain(Tokens tokens) const override {
    auto marker = TextPattern::literal(replacement_);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = marker.replace_all(tokens[i], " ");
      if (i == 0 && strip_first_ && tokens[i].starts_with(' ')) tokens[i].erase(0, 1);
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// Byte-level text back to bytes; a token with characters outside the alphabet (an added token) stays as it is.
class ByteLevel final : public TokenDecoder {
 public:
  Tokens decode_chain(Tokens tokens) const override {
    std::string all;
    for (const std::string& token : tokens) {
      if (auto raw = from_byte_level(token)) all += *raw;
      else all += token;
    }
    return {all};
  }
};

class WordPiece final : public TokenDecoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  Tokens decode_chain(Tokens tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i > 0) {
        if (token.starts_with(prefix_)) token.erase(0, prefix_.size());
        else token.insert(0, " ");
      }
      if (cleanup_) token = clean_up(token);
    }
    return tokens;
  }

 private:
  // transformers' clean_up_tokenization: no space before punctuation and English contractions.
  static std::string clean_up(std::string text) {
    static const std::pair<const char*, const char*> rules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"},
        {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (auto [from, to] : rules) text = TextPattern::literal(from).replace_all(text, to);
    return text;
  }
  std::string prefix_;
  bool cleanup_;
};

// The end-of-word suffix becomes a space, except on the last token.
class BpeSuffix final : public TokenDecoder {
 public:
  explicit BpeSuffix(std::string suffix) : suffix_(std::move(suffix)) {}
  Tokens decode_chain(Tokens tokens) const override {
    auto marker = TextPattern::literal(suffix_);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = marker.replace_all(tokens[i], i + 1 == tokens.size() ? "" : " ");
    return tokens;
  }

 private:
  std::string suffix_;
};

class Sequence final : public TokenDecoder {
 public:
  explicit Sequence(std::vector<TokenDecoderPtr> steps) : steps_(std::move(steps)) {}
  Tokens decode_chain(Tokens tokens) const override {
    for (const auto& step : steps_) tokens = step->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<TokenDecoderPtr> steps_;
};

std::size_t count(const JsonFields& f, const json& node, const char* key, const std::string& where) {
  std::int64_t n = f.integer_or(node, key, 0, where + "." + key);
  if (n < 0) f.fail_at(where + "." + key, str("is ", n, "; it must be 0 or more"));
  return static_cast<std::size_t>(n);
}

using Row = ComponentRow<TokenDecoderPtr>;

const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {"ByteFallback", [](const JsonFields&, const json&, const std::string&) -> TokenDecoderPtr {
         return std::make_unique<ByteFallback>(); }},
      {"Fuse", [](const JsonFields&, const json&, const std::string&) -> TokenDecoderPtr { return std::make_unique<Fuse>(); }},
      {"Strip", [](const JsonFields& f, const json& node, const std::string& where) -> TokenDecoderPtr {
         return std::make_unique<Strip>(f.string(f.need(node, "content", where + ".content"), where + ".content"),
                                        count(f, node, "start", where), count(f, node, "stop", where)); }},
      {"Replace", [](const JsonFields& f, const json& node, const std::string& where) -> TokenDecoderPtr {
         return std::make_unique<Replace>(TextPattern(f, f.need(node, "pattern", where + ".pattern"), where + ".pattern"),
                                          f.string(f.need(node, "content", where + ".content"), where + ".content")); }},
      {"Metaspace", [](const JsonFields& f, const json& node, const std::string& where) -> TokenDecoderPtr {
         std::string scheme = f.string_or(node, "prepend_scheme", "", where + ".prepend_scheme");
         bool strip = scheme.empty() ? f.boolean_or(node, "add_prefix_space", true, where + ".add_prefix_space")
                                     : scheme != "never";
         return std::make_unique<Metaspace>(f.string_or(node, "replacement", "\xE2\x96\x81", where + ".replacement"), strip); }},
      {"ByteLevel", [](const JsonFields&, const json&, const std::string&) -> TokenDecoderPtr {
         return std::make_unique<ByteLevel>(); }},
      {"WordPiece", [](const JsonFields& f, const json& node, const std::string& where) -> TokenDecoderPtr {
         return std::make_unique<WordPiece>(f.string_or(node, "prefix", "##", where + ".prefix"),
                                            f.boolean_or(node, "cleanup", true, where + ".cleanup")); }},
      {"BPEDecoder", [](const JsonFields& f, const json& node, const std::string& where) -> TokenDecoderPtr {
         return std::make_unique<BpeSuffix>(f.string_or(node, "suffix", "</w>", where + ".suffix")); }},
      {"Sequence", [](const JsonFields& f, const json& node, const std::string& where) -> TokenDecoderPtr {
         return std::make_unique<Sequence>(read_component_list<TokenDecoderPtr>(f, node, "decoders", where, read_token_decoder)); }},
  };
  return rows;
}

}  // namespace

TokenDecoderPtr read_token_decoder(const JsonFields& fields, const json& node, const std::string& where) {
  return read_component(table(), fields, node, where);
}

TokenDecoderPtr make_sentencepiece_decoder(bool strip_first_space) {
  std::vector<TokenDecoderPtr> steps;
  steps.push_back(std::make_unique<Replace>(TextPattern::literal("\xE2\x96\x81"), " "));
  steps.push_back(std::make_unique<ByteFallback>());
  steps.push_back(std::make_unique<Fuse>());
  if (strip_first_space) steps.push_back(std::make_unique<Strip>(" ", 1, 0));
  return std::make_unique<Sequence>(std::move(steps));
}

}  // namespace dew::data
