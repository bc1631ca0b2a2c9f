// tokenizer.json -> TokenizerPipeline: each component through its own table.
#include "dew/core/error.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"

namespace dew::data {
namespace {

using nlohmann::json;

std::vector<AddedTokenSpec> read_added_tokens(const JsonFields& f, const json& root) {
  std::vector<AddedTokenSpec> out;
  const json* list = f.find(root, "added_tokens");
  if (!list) return out;
  f.array(*list, "added_tokens");
  for (std::size_t i = 0; i < list->size(); ++i) {
    std::string where = str("added_tokens[", i, "]");
    const json& node = f.object((*list)[i], where);
    AddedTokenSpec token;
    token.content = f.string(f.need(node, "content", where + ".content"), where + ".content");
    if (token.content.empty()) f.fail_at(where + ".content", "is empty");
    token.id = f.id(f.need(node, "id", where + ".id"), where + ".id");
    token.special = f.boolean_or(node, "special", false, where + ".special");
    token.lstrip = f.boolean_or(node, "lstrip", false, where + ".lstrip");
    token.rstrip = f.boolean_or(node, "rstrip", false, where + ".rstrip");
    token.single_word = f.boolean_or(node, "single_word", false, where + ".single_word");
    token.normalized = f.boolean_or(node, "normalized", !token.special, where + ".normalized");
    out.push_back(std::move(token));
  }
  return out;
}

}  // namespace

TokenizerPipeline read_tokenizer_pipeline(std::string_view json_text, const std::string& path) {
  JsonFields f{path};
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  f.object(root, "(top level)");
  TokenizerPipeline pipeline;
  pipeline.model = read_token_model(f, f.need(root, "model", "model"));
  if (const json* node = f.find(root, "normalizer")) pipeline.normalizer = read_normalizer(f, *node, "normalizer");
  if (const json* node = f.find(root, "pre_tokenizer"))
    pipeline.pre_tokenizer = read_pre_tokenizer_step(f, *node, "pre_tokenizer");
  if (const json* node = f.find(root, "decoder")) pipeline.decoder = read_token_decoder(f, *node, "decoder");
  if (const json* node = f.find(root, "post_processor")) {
    pipeline.post_processor = read_post_processor(f, *node, "post_processor");
    pipeline.post_processor_json = node->dump();
  }
  pipeline.added_tokens = read_added_tokens(f, root);
  pipeline.json_text = std::string(json_text);
  return pipeline;
}

}  // namespace dew::data
