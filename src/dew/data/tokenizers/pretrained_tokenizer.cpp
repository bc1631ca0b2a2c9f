#include "dew/data/tokenizers/pretrained_tokenizer.h"

#include <algorithm>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"

namespace dew::data {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Json read_json_file(const fs::path& path) {
  std::string text = read_file(path);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    fail(path.string(), ": not valid JSON: ", e.what());
  }
}

// A special token field: "text", {"content": "text", ...}, or null/absent ("").
std::string token_text(const Json& config, const char* key, const fs::path& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  fail(path.string(), ": field '", key, "' must be a string or an object with a string 'content', not ", it->dump());
}

// The id of a token's text: an added or vocabulary token of the tokenizer, else tokenizer_config.json's
// added_tokens_decoder.
TokenId token_id(const Tokenizer& tokenizer, const Json& added_decoder, const std::string& text,
                 const std::string& where) {
  if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer)) {
    for (const AddedToken& added : bpe->definition().added_tokens)
      if (added.content == text) return added.id;
  }
  if (const auto* pipeline = dynamic_cast<const PipelineTokenizer*>(&tokenizer))
    if (auto id = pipeline->token_to_id(text)) return *id;
  std::vector<TokenId> ids = tokenizer.encode(text, /*allow_special=*/true);
  if (ids.size() == 1) return ids[0];
  if (added_decoder.is_object())
    for (auto it = added_decoder.begin(); it != added_decoder.end(); ++it)
      if (it.value().is_object() && it.value().value("content", "") == text) {
        long long id = -1;
        try {
          id = std::stoll(it.key());
        } catch (const std::exception&) {
        }
        if (id < 0 || id >= tokenizer.vocab_size())
          fail(where, ": added_tokens_decoder gives '", text, "' the id '", it.key(), "', outside the vocabulary of ",
               tokenizer.vocab_size());
        return static_cast<TokenId>(id);
      }
  fail(where, ": '", text, "' is not one token of the tokenizer (it encodes to ", ids.size(), " ids)");
}

void add_stop(std::vector<TokenId>& stops, TokenId id) {
  if (std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(id);
}

std::vector<TokenId> id_list(const Json& value, const fs::path& path, const char* key) {
  std::vector<TokenId> ids;
  auto one = [&](const Json& v) {
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT32_MAX)
      fail(path.string(), ": field '", key, "' must be a token id or a list of them, not ", value.dump());
    ids.push_back(static_cast<TokenId>(v.get<long long>()));
  };
  if (value.is_null()) return ids;
  if (value.is_array()) {
    for (const Json& v : value) one(v);
  } else {
    one(value);
  }
  return ids;
}

// Whether tokenizer.json's post_processor puts `bos` first (Llama 3: TemplateProcessing, maybe in a
// Sequence), which is how transformers decides to add BOS when tokenizer_config.json does not say.
bool post_processor_adds(const std::string& post_processor_json, const std::string& bos) {
  if (post_processor_json.empty() || bos.empty()) return false;
  Json pp = Json::parse(post_processor_json, nullptr, /*allow_exceptions=*/false);
  std::vector<const Json*> pending{&pp};
  while (!pending.empty()) {
    const Json* node = pending.back();
    pending.pop_back();
    if (!node->is_object()) continue;
    if (node->value("type", "") == "Sequence" && node->contains("processors") && (*node)["processors"].is_array()) {
      for (const Json& p : (*node)["processors"]) pending.push_back(&p);
    } else if (node->value("type", "") == "TemplateProcessing" && node->contains("single") &&
               (*node)["single"].is_array() && !(*node)["single"].empty()) {
      const Json& first = (*node)["single"][0];
      if (first.contains("SpecialToken") && first["SpecialToken"].value("id", "") == bos) return true;
    }
  }
  return false;
}

}  // namespace

std::vector<TokenId> PretrainedTokenizer::encode(std::string_view text) const {
  std::vector<TokenId> ids = tokenizer->encode(text, /*allow_special=*/true);
  if (add_bos && bos_id) ids.insert(ids.begin(), *bos_id);
  return ids;
}

std::string PretrainedTokenizer::render_chat(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                             const nlohmann::ordered_json& extra) const {
  if (!chat_template) fail("tokenizer '", tokenizer->name(), "' has no chat template (tokenizer_config.json 'chat_template')");
  Json variables = Json::object();
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"bos_token", &bos_token}, {"eos_token", &eos_token},
        {"unk_token", &unk_token}, {"pad_token", &pad_token}})
    if (!value->empty()) variables[key] = *value;
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) variables[it.key()] = it.value();
  return chat_template->render(messages, add_generation_prompt, variables);
}

PretrainedTokenizer load_pretrained_tokenizer(const fs::path& dir) {
  if (!fs::is_directory(dir)) fail("tokenizer directory ", dir, " does not exist");
  PretrainedTokenizer out;
  out.tokenizer = load_tokenizer(dir.string());
  const Tokenizer& tokenizer = *out.tokenizer;
  fs::path config_path = dir / "tokenizer_config.json";
  Json config = fs::exists(config_path) ? read_json_file(config_path) : Json::object();
  if (!config.is_object()) fail(config_path.string(), ": must hold a JSON object");
  Json added_decoder = config.contains("added_tokens_decoder") ? config["added_tokens_decoder"] : Json();
  if (!added_decoder.is_null() && !added_decoder.is_object())
    fail(config_path.string(), ": field 'added_tokens_decoder' must be an object of id -> token");
  std::string where = config_path.string();

  out.bos_token = token_text(config, "bos_token", config_path);
  out.eos_token = token_text(config, "eos_token", config_path);
  out.pad_token = token_text(config, "pad_token", config_path);
  out.unk_token = token_text(config, "unk_token", config_path);
  if (!out.bos_token.empty()) out.bos_id = token_id(tokenizer, added_decoder, out.bos_token, where + ": bos_token");
  if (!out.pad_token.empty()) out.pad_id = token_id(tokenizer, added_decoder, out.pad_token, where + ": pad_token");
  if (!out.eos_token.empty()) {
    out.eos_id = token_id(tokenizer, added_decoder, out.eos_token, where + ": eos_token");
  } else if (tokenizer.eos_id()) {
    out.eos_id = tokenizer.eos_id();
    out.eos_token = tokenizer.decode(std::vector<TokenId>{*out.eos_id});
  }

  if (auto it = config.find("add_bos_token"); it != config.end() && !it->is_null()) {
    if (!it->is_boolean()) fail(where, ": field 'add_bos_token' must be true or false, not ", it->dump());
    out.add_bos = it->get<bool>();
  } else if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tokenizer)) {
    out.add_bos = post_processor_adds(bpe->definition().post_processor_json, out.bos_token);
  } else if (const auto* pipeline = dynamic_cast<const PipelineTokenizer*>(&tokenizer)) {
    out.add_bos = post_processor_adds(pipeline->post_processor_json(), out.bos_token);
  }

  if (auto it = config.find("model_max_length"); it != config.end() && it->is_number()) {
    // transformers writes 1e30 for "no limit"; only a length an int64 holds exactly is kept.
    double length = it->get<double>();
    if (length > 0 && length < 9.0e15) out.model_max_length = static_cast<long long>(length);
  }

  if (auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
    if (it->is_string()) {
      out.chat_template.emplace(it->get<std::string>(), where + ": chat_template");
    } else if (it->is_array()) {
      for (const Json& entry : *it) {
        if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
            !entry["template"].is_string())
          fail(where, ": each entry of the 'chat_template' list must be {\"name\": ..., \"template\": ...}, not ", entry.dump());
        if (entry["name"] == "default")
          out.chat_template.emplace(entry["template"].get<std::string>(), where + ": chat_template 'default'");
      }
      if (!out.chat_template) fail(where, ": the 'chat_template' list has no template named 'default'");
    } else {
      fail(where, ": field 'chat_template' must be a string or a list of {name, template}, not ", it->type_name());
    }
  } else if (fs::exists(dir / "chat_template.jinja")) {
    // transformers 4.50+ saves the template beside the config.
    out.chat_template.emplace(read_file(dir / "chat_template.jinja"), (dir / "chat_template.jinja").string());
  }

  if (out.eos_id) out.stop_ids.push_back(*out.eos_id);
  fs::path generation_path = dir / "generation_config.json";
  if (fs::exists(generation_path)) {
    Json generation = read_json_file(generation_path);
    if (!generation.is_object()) fail(generation_path.string(), ": must hold a JSON object");
    if (generation.contains("eos_token_id"))
      for (TokenId id : id_list(generation["eos_token_id"], generation_path, "eos_token_id")) {
        if (id >= tokenizer.vocab_size())
          fail(generation_path.string(), ": eos_token_id ", id, " is outside the vocabulary of ", tokenizer.vocab_size());
        add_stop(out.stop_ids, id);
      }
  }
  return out;
}

void save_pretrained_tokenizer(const PretrainedTokenizer& tokenizer, const fs::path& dir) {
  if (!tokenizer.tokenizer) fail("save_pretrained_tokenizer: the tokenizer is empty");
  fs::create_directories(dir);
  std::string written = tokenizer.tokenizer->save(dir);
  if (written != "tokenizer.json")
    fail("save_pretrained_tokenizer: tokenizer '", tokenizer.tokenizer->name(), "' saves as ", written,
         ", which transformers cannot load; only tokenizer.json tokenizers can be saved as a checkpoint's");
  Json config = Json::object();
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["add_bos_token"] = tokenizer.add_bos;
  config["add_eos_token"] = false;
  auto put = [&](const char* key, const std::string& value) { config[key] = value.empty() ? Json() : Json(value); };
  put("bos_token", tokenizer.bos_token);
  put("eos_token", tokenizer.eos_token);
  put("pad_token", tokenizer.pad_token);
  put("unk_token", tokenizer.unk_token);
  if (tokenizer.model_max_length) config["model_max_length"] = *tokenizer.model_max_length;
  config["clean_up_tokenization_spaces"] = false;
  if (tokenizer.chat_template) config["chat_template"] = tokenizer.chat_template->source();
  write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
  std::vector<TokenId> extra_stops;
  for (TokenId id : tokenizer.stop_ids)
    if (!tokenizer.eos_id || id != *tokenizer.eos_id) extra_stops.push_back(id);
  if (!extra_stops.empty()) {
    Json generation = Json::object();
    if (tokenizer.bos_id) generation["bos_token_id"] = *tokenizer.bos_id;
    generation["eos_token_id"] = tokenizer.stop_ids;
    write_file_atomic(dir / "generation_config.json", generation.dump(2) + "\n");
  }
}

}  // namespace dew::data
