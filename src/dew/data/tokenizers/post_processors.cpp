// The tokenizer.json post-processors for one sequence, and the table that reads them.
#include "dew/core/error.h"
#include "dew/data/tokenizers/component_table.h"
#include "dew/data/tokenizers/post_processor.h"

namespace dew::data {
namespace {

using nlohmann::json;

// Ids before and after the sequence: every template, Bert's and Roberta's come down to this for one text.
class Surround final : public PostProcessor {
 public:
  Surround(std::vector<TokenId> before, std::vector<TokenId> after) : before_(std::move(before)), after_(std::move(after)) {}
  std::vector<TokenId> process(std::vector<TokenId> ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
    return ids;
  }

 private:
  std::vector<TokenId> before_, after_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<PostProcessorPtr> steps) : steps_(std::move(steps)) {}
  std::vector<TokenId> process(std::vector<TokenId> ids) const override {
    for (const auto& step : steps_) ids = step->process(std::move(ids));
    return ids;
  }

 private:
  std::vector<PostProcessorPtr> steps_;
};

// TemplateProcessing's "single": a list of {"SpecialToken": {"id": name}} and one {"Sequence": {"id": "A"}};
// a special token's ids come from "special_tokens"[name].ids.
PostProcessorPtr read_template(const JsonFields& f, const json& node, const std::string& where) {
  const json& single = f.array(f.need(node, "single", where + ".single"), where + ".single");
  const json* specials = f.find(node, "special_tokens");
  std::vector<TokenId> before, after;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    std::string at = str(where, ".single[", i, "]");
    const json& piece = f.object(single[i], at);
    if (f.find(piece, "Sequence")) {
      seen_sequence = true;
      continue;
    }
    const json& special = f.object(f.need(piece, "SpecialToken", at + ".SpecialToken"), at + ".SpecialToken");
    std::string name = f.string(f.need(special, "id", at + ".SpecialToken.id"), at + ".SpecialToken.id");
    const json* entry = specials ? f.find(*specials, name.c_str()) : nullptr;
    if (!entry) f.fail_at(at, str("names the special token '", name, "', which ", where, ".special_tokens does not define"));
    std::string ids_at = where + ".special_tokens[\"" + name + "\"].ids";
    for (const json& id : f.array(f.need(*entry, "ids", ids_at), ids_at))
      (seen_sequence ? after : before).push_back(f.id(id, ids_at));
  }
  if (!seen_sequence) f.fail_at(where + ".single", "has no {\"Sequence\": ...} entry for the text");
  return std::make_unique<Surround>(std::move(before), std::move(after));
}

// BertProcessing / RobertaProcessing: {"cls": [text, id], "sep": [text, id]} -> cls A sep.
PostProcessorPtr read_cls_sep(const JsonFields& f, const json& node, const std::string& where) {
  auto id_of = [&](const char* key) {
    std::string at = where + "." + key;
    const json& pair = f.array(f.need(node, key, at), at);
    if (pair.size() != 2) f.fail_at(at, str("must be [token, id], not ", pair.dump()));
    return f.id(pair[1], at + "[1]");
  };
  return std::make_unique<Surround>(std::vector<TokenId>{id_of("cls")}, std::vector<TokenId>{id_of("sep")});
}

using Row = ComponentRow<PostProcessorPtr>;

const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {"TemplateProcessing", read_template},
      {"BertProcessing", read_cls_sep},
      {"RobertaProcessing", read_cls_sep},
      {"ByteLevel", [](const JsonFields&, const json&, const std::string&) -> PostProcessorPtr {
         return std::make_unique<Surround>(std::vector<TokenId>{}, std::vector<TokenId>{}); }},
      {"Sequence", [](const JsonFields& f, const json& node, const std::string& where) -> PostProcessorPtr {
         return std::make_unique<Sequence>(read_component_list<PostProcessorPtr>(f, node, "processors", where, read_post_processor)); }},
  };
  return rows;
}

}  // namespace

PostProcessorPtr read_post_processor(const JsonFields& fields, const json& node, const std::string& where) {
  return read_component(table(), fields, node, where);
}

PostProcessorPtr make_bos_eos_processor(std::optional<TokenId> bos, std::optional<TokenId> eos) {
  std::vector<TokenId> before, after;
  if (bos) before.push_back(*bos);
  if (eos) after.push_back(*eos);
  return std::make_unique<Surround>(std::move(before), std::move(after));
}

}  // namespace dew::data
