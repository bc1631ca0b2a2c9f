// The tokenizer.json normalizers, one small class per Hugging Face type, and the table that reads them.
#include <vector>

#include "dew/core/error.h"
#include "dew/data/tokenizers/component_table.h"
#include "dew/data/tokenizers/base64.h"
#include "dew/data/tokenizers/normalizer.h"
#include "dew/data/tokenizers/precompiled_charsmap.h"
#include "dew/data/tokenizers/regex_matches.h"
#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {
namespace {

using nlohmann::json;

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  std::string normalize(std::string_view text) const override { return unicode_normalize(text, form_); }

 private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return unicode_lowercase(text); }
};

class StripAccents final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return strip_accents(text); }
};

// Removes whitespace (Rust's char::is_whitespace) from either end.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override {
    std::size_t n = 0;
    if (left_)
      while (!text.empty() && is_unicode_whitespace(utf8_char_at(text, 0, n))) text.remove_prefix(n);
    if (right_)
      while (!text.empty()) {
        std::size_t last = text.size() - 1;
        while (last > 0 && (static_cast<unsigned char>(text[last]) & 0xC0) == 0x80) --last;
        if (!is_unicode_whitespace(utf8_char_at(text, last, n))) break;
        text = text.substr(0, last);
      }
    return std::string(text);
  }

 private:
  bool left_, right_;
};

// Hugging Face prepends only to non-empty text.
class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override {
    return text.empty() ? std::string() : prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(TextPattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string_view text) const override { return pattern_.replace_all(text, content_); }

 private:
  TextPattern pattern_;
  std::string content_;
};

class Precompiled final : public Normalizer {
 public:
  Precompiled(std::string_view blob, const std::string& where) : charsmap_(blob, where) {}
  std::string normalize(std::string_view text) const override { return charsmap_.normalize(text); }

 private:
  PrecompiledCharsmap charsmap_;
};

// BERT's: control characters dropped and whitespace made ' ', CJK ideographs spaced apart, accents
// stripped (by default when lowercasing), lowercase.
class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool accents, bool lower)
      : clean_(clean), chinese_(chinese), accents_(accents), lower_(lower) {}
  std::string normalize(std::string_view text) const override {
    std::string out;
    out.reserve(text.size());
    for (std::size_t pos = 0, n = 0; pos < text.size(); pos += n) {
      char32_t c = utf8_char_at(text, pos, n);
      bool whitespace = c == '\t' || c == '\n' || c == '\r' || is_unicode_whitespace(c);
      if (clean_ && (c == 0 || c == 0xFFFD || (!whitespace && is_unicode_control(c)))) continue;
      if (clean_ && whitespace) out += ' ';
      else if (chinese_ && is_cjk_ideograph(c)) out.append(" ").append(text.substr(pos, n)).append(" ");
      else out.append(text.substr(pos, n));
    }
    if (accents_) out = strip_accents(unicode_normalize(out, NormalForm::NFD));
    if (lower_) out = unicode_lowercase(out);
    return out;
  }

 private:
  bool clean_, chinese_, accents_, lower_;
};

// SentencePiece's nmt_nfkc clean-up without the NFKC: control characters dropped, odd spaces made ' '.
class Nmt final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override {
    std::string out;
    out.reserve(text.size());
    for (std::size_t pos = 0, n = 0; pos < text.size(); pos += n) {
      char32_t c = utf8_char_at(text, pos, n);
      bool drop = (c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F;
      bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
                   c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      if (drop) continue;
      if (space) out += ' ';
      else out.append(text.substr(pos, n));
    }
    return out;
  }
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<NormalizerPtr> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const override {
    std::string out(text);
    for (const auto& step : steps_) out = step->normalize(out);
    return out;
  }

 private:
  std::vector<NormalizerPtr> steps_;
};

using Row = ComponentRow<NormalizerPtr>;

const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {"NFC", [](const JsonFields&, const json&, const std::string&) -> NormalizerPtr {
         return std::make_unique<UnicodeForm>(NormalForm::NFC); }},
      {"NFD", [](const JsonFields&, const json&, const std::string&) -> NormalizerPtr {
         return std::make_unique<UnicodeForm>(NormalForm::NFD); }},
      {"NFKC", [](const JsonFields&, const json&, const std::string&) -> NormalizerPtr {
         return std::make_unique<UnicodeForm>(NormalForm::NFKC); }},
      {"NFKD", [](const JsonFields&, const json&, const std::string&) -> NormalizerPtr {
         return std::make_unique<UnicodeForm>(NormalForm::NFKD); }},
      {"Lowercase", [](const JsonFields&, const json&, const std::string&) -> NormalizerPtr {
         return std::make_unique<Lowercase>(); }},
      {"StripAccents", [](const JsonFields&, const json&, const std::string&) -> NormalizerPtr {
         return std::make_unique<StripAccents>(); }},
      {"Nmt", [](const JsonFields&, const json&, const std::string&) -> NormalizerPtr { return std::make_unique<Nmt>(); }},
      {"Strip", [](const JsonFields& f, const json& node, const std::string& where) -> NormalizerPtr {
         return std::make_unique<Strip>(f.boolean_or(node, "strip_left", true, where + ".strip_left"),
                                        f.boolean_or(node, "strip_right", true, where + ".strip_right")); }},
      {"Prepend", [](const JsonFields& f, const json& node, const std::string& where) -> NormalizerPtr {
         return std::make_unique<Prepend>(f.string(f.need(node, "prepend", where + ".prepend"), where + ".prepend")); }},
      {"Replace", [](const JsonFields& f, const json& node, const std::string& where) -> NormalizerPtr {
         return std::make_unique<Replace>(TextPattern(f, f.need(node, "pattern", where + ".pattern"), where + ".pattern"),
                                          f.string(f.need(node, "content", where + ".content"), where + ".content")); }},
      {"Precompiled", [](const JsonFields& f, const json& node, const std::string& where) -> NormalizerPtr {
         std::string field = where + ".precompiled_charsmap";
         const json* charsmap = f.find(node, "precompiled_charsmap");
         if (!charsmap || (charsmap->is_string() && charsmap->get_ref<const std::string&>().empty()))
           return std::make_unique<Sequence>(std::vector<NormalizerPtr>{});  // no rules: text unchanged
         std::string blob;
         if (!base64_decode(f.string(*charsmap, field), blob)) f.fail_at(field, "is not valid base64");
         return std::make_unique<Precompiled>(blob, f.path + ": field '" + field + "'"); }},
      {"BertNormalizer", [](const JsonFields& f, const json& node, const std::string& where) -> NormalizerPtr {
         bool lower = f.boolean_or(node, "lowercase", true, where + ".lowercase");
         return std::make_unique<BertNormalizer>(f.boolean_or(node, "clean_text", true, where + ".clean_text"),
                                                 f.boolean_or(node, "handle_chinese_chars", true, where + ".handle_chinese_chars"),
                                                 f.boolean_or(node, "strip_accents", lower, where + ".strip_accents"), lower); }},
      {"Sequence", [](const JsonFields& f, const json& node, const std::string& where) -> NormalizerPtr {
         return std::make_unique<Sequence>(read_component_list<NormalizerPtr>(f, node, "normalizers", where, read_normalizer)); }},
  };
  return rows;
}

}  // namespace

NormalizerPtr read_normalizer(const JsonFields& fields, const json& node, const std::string& where) {
  return read_component(table(), fields, node, where);
}

NormalizerPtr make_normalizer_sequence(std::vector<NormalizerPtr> steps) {
  return std::make_unique<Sequence>(std::move(steps));
}

NormalizerPtr make_precompiled_normalizer(std::string charsmap, const std::string& where) {
  return std::make_unique<Precompiled>(charsmap, where);
}

}  // namespace dew::data
