#include "dew/interop/generation_config.h"

#include <cmath>
#include <limits>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace dew::interop {

namespace {

// Fields that never change which tokens are drawn: bookkeeping, what generate() returns, caches and
// compilation, speculative decoding (which keeps the distribution), and settings only beam search reads
// (beam search itself, num_beams > 1, is refused below).
const std::set<std::string, std::less<>> kGenerationInertFields = {
    "transformers_version", "_from_model_config", "_commit_hash", "use_cache", "cache_implementation",
    "cache_config", "return_legacy_cache", "return_dict_in_generate", "output_attentions",
    "output_hidden_states", "output_scores", "output_logits", "num_return_sequences", "compile_config",
    "disable_compile", "prefill_chunk_size", "low_memory", "max_time", "remove_invalid_values",
    "renormalize_logits", "assistant_confidence_threshold", "num_assistant_tokens", "num_assistant_tokens_schedule",
    "prompt_lookup_num_tokens", "max_matching_ngram_size", "assistant_early_exit", "assistant_lookbehind",
    "target_lookbehind", "is_assistant", "length_penalty", "early_stopping", "decoder_start_token_id",
    "generation_kwargs", "trust_remote_code", "token_healing",
    // Dream's diffusion_generate settings: dew's masked-diffusion sampler takes --steps and --remasking
    // instead and does not read them from the file.
    "alg", "alg_temp", "steps", "eps", "output_history"};

// Fields that would change the tokens and that dew's sampler cannot express, with the value at which they
// do nothing (null counts as neutral for all of them).
const std::vector<std::pair<std::string, Json>>& unexpressible_fields() {
  static const std::vector<std::pair<std::string, Json>> fields = {
      {"num_beams", 1}, {"num_beam_groups", 1}, {"diversity_penalty", 0.0}, {"penalty_alpha", nullptr},
      {"typical_p", 1.0}, {"epsilon_cutoff", 0.0}, {"eta_cutoff", 0.0}, {"no_repeat_ngram_size", 0},
      {"encoder_no_repeat_ngram_size", 0}, {"encoder_repetition_penalty", 1.0}, {"bad_words_ids", nullptr},
      {"force_words_ids", nullptr}, {"forced_bos_token_id", nullptr}, {"forced_eos_token_id", nullptr},
      {"suppress_tokens", nullptr}, {"begin_suppress_tokens", nullptr}, {"sequence_bias", nullptr},
      {"guidance_scale", nullptr}, {"min_length", 0}, {"min_new_tokens", nullptr},
      {"exponential_decay_length_penalty", nullptr}, {"watermarking_config", nullptr}, {"stop_strings", nullptr},
      {"dola_layers", nullptr}, {"constraints", nullptr}, {"top_h", nullptr}};
  return fields;
}

bool neutral(const Json& value, const Json& neutral_value) {
  if (value.is_null()) return true;
  if (value.is_array() && value.empty()) return true;  // suppress_tokens: [] suppresses nothing
  if (value.is_number() && neutral_value.is_number()) return value.get<double>() == neutral_value.get<double>();
  return value == neutral_value;
}

// Reads generation_config.json's fields one by one, naming the file and the field in every error.
class FieldReader {
 public:
  FieldReader(const Json& json, const fs::path& file) : json_(json), file_(file.string()) {}

  // The field when present and not null.
  const Json* find(const char* key) const {
    auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<bool> boolean(const char* key) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) refuse(key, *v, "must be true or false");
    return v->get<bool>();
  }
  // A finite number in [low, high] (high_open: high itself refused).
  std::optional<double> number(const char* key, double low, double high, const char* range) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) refuse(key, *v, str("must be a number in ", range));
    const double x = v->get<double>();
    if (!(x >= low && x <= high && std::isfinite(x))) refuse(key, *v, str("is out of range; use a number in ", range));
    return x;
  }
  std::optional<std::int64_t> integer(const char* key, std::int64_t low, const char* what) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer() || v->get<std::int64_t>() < low) refuse(key, *v, str("must be ", what));
    return v->get<std::int64_t>();
  }
  std::vector<std::int64_t> ids(const char* key) const {
    const Json* v = find(key);
    std::vector<std::int64_t> out;
    if (!v) return out;
    auto one = [&](const Json& id) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > INT32_MAX)
        refuse(key, *v, "must be a token id (a non-negative integer) or a list of them");
      out.push_back(id.get<std::int64_t>());
    };
    if (v->is_array()) {
      for (const Json& id : *v) one(id);
    } else {
      one(*v);
    }
    return out;
  }
  [[noreturn]] void refuse(const std::string& key, const Json& value, const std::string& why) const {
    fail(file_, ": field '", key, "' is ", value.dump(), " and ", why, "; fix or remove it in the file");
  }

 private:
  const Json& json_;
  std::string file_;
};

// Every field is read, known to be inert, or refused by name.
void check_fields(const Json& json, const FieldReader& reader, const fs::path& file) {
  static const std::set<std::string, std::less<>> read = {
      "do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "eos_token_id", "bos_token_id",
      "pad_token_id", "max_new_tokens", "max_length"};
  for (const auto& [key, value] : json.items()) {
    if (read.contains(key) || kGenerationInertFields.contains(key)) continue;
    bool known = false;
    for (const auto& [name, neutral_value] : unexpressible_fields()) {
      if (name != key) continue;
      known = true;
      if (!neutral(value, neutral_value)) {
        reader.refuse(key, value, str("dew's sampler cannot do that (it samples one token at a time with temperature, "
                                      "top-k, top-p, min-p and a repetition penalty); ", neutral_value.dump(),
                                      " or null turns it off"));
      }
    }
    if (!known) {
      fail(file.string(), ": field '", key, "' (", value.dump(), ") is not a generation setting dew knows; it reads "
           "do_sample, temperature, top_k, top_p, min_p, repetition_penalty, eos_token_id, max_new_tokens and "
           "max_length. Remove the field if it does not change generation");
    }
  }
}

}  // namespace

GenerationDefaults read_generation_config(const fs::path& file) {
  Json json;
  try {
    json = Json::parse(read_file(file));
  } catch (const Json::exception& e) {
    fail(file.string(), ": not valid JSON (", e.what(), "); fix the file or remove it to use dew's defaults");
  }
  if (!json.is_object()) fail(file.string(), ": must hold a JSON object like {\"do_sample\": true, \"temperature\": 0.7}");
  FieldReader reader(json, file);
  check_fields(json, reader, file);

  GenerationDefaults out;
  out.source = file.string();
  const std::optional<bool> do_sample = reader.boolean("do_sample");
  const auto temperature = reader.number("temperature", 0.0, std::numeric_limits<double>::max(), "[0, inf) (0 = greedy)");
  auto top_k = reader.integer("top_k", 0, "a count >= 0 (0 = off)");
  out.top_p = reader.number("top_p", std::numeric_limits<double>::min(), 1.0, "(0, 1] (1 = off)");
  out.min_p = reader.number("min_p", 0.0, 1.0, "[0, 1] (0 = off)");
  out.repetition_penalty =
      reader.number("repetition_penalty", std::numeric_limits<double>::min(), std::numeric_limits<double>::max(), "(0, inf) (1 = off)");
  out.max_new_tokens = reader.integer("max_new_tokens", 1, "a count >= 1");
  out.max_length = reader.integer("max_length", 1, "a count >= 1 (prompt + continuation)");
  out.eos_ids = reader.ids("eos_token_id");
  reader.ids("bos_token_id");
  reader.ids("pad_token_id");

  if (do_sample.value_or(false)) {
    out.temperature = temperature.value_or(1.0);
    if (!temperature) out.temperature_reason = "do_sample is true and temperature absent: transformers' 1";
    out.top_k = top_k.value_or(50);
    if (!top_k) out.top_k_reason = "do_sample is true and top_k absent: transformers' 50";
  } else if (do_sample) {
    out.temperature = 0.0;
    out.temperature_reason = "do_sample is false: greedy";
    out.top_k = top_k;
  } else {
    // transformers would decode greedily; the command's own default applies (greedy for generate and chat,
    // OpenAI's 1 for serve), so a file that only lists token ids changes nothing.
    out.top_k = top_k;
  }
  return out;
}

GenerationDefaults read_gguf_sampling(const formats::GgufFile& file) {
  GenerationDefaults out;
  const std::string prefix = "general.sampling.";
  auto value = [&](const std::string& name) { return file.find(prefix + name); };
  auto refuse = [&](const std::string& name, const std::string& why) {
    const formats::GgufValue* v = value(name);
    const std::string shown = v->is_float() ? str(v->as_float()) : v->is_integer() ? str(v->as_int()) : v->type_name();
    fail(file.name(), ": metadata ", prefix, name, " is ", shown, " and ", why);
  };
  bool any = false;
  for (const auto& [key, v] : file.metadata()) any = any || key.starts_with(prefix);
  if (!any) return out;
  out.source = file.name();
  if (const auto* v = value("temp")) {
    out.temperature = v->as_float();
    if (!(*out.temperature >= 0.0 && std::isfinite(*out.temperature))) refuse("temp", "must be 0 (greedy) or more");
  }
  if (const auto* v = value("top_k")) {
    out.top_k = v->as_int();
    if (*out.top_k < 0) refuse("top_k", "must be 0 (off) or more");
  }
  if (const auto* v = value("top_p")) {
    out.top_p = v->as_float();
    if (!(*out.top_p > 0.0 && *out.top_p <= 1.0)) refuse("top_p", "must be in (0, 1]");
  }
  if (const auto* v = value("min_p")) {
    out.min_p = v->as_float();
    if (!(*out.min_p >= 0.0 && *out.min_p <= 1.0)) refuse("min_p", "must be in [0, 1]");
  }
  if (const auto* v = value("penalty_repeat")) {
    out.repetition_penalty = v->as_float();
    if (!(*out.repetition_penalty > 0.0 && std::isfinite(*out.repetition_penalty))) refuse("penalty_repeat", "must be > 0");
  }
  if (const auto* v = value("penalty_last_n")) {
    const std::int64_t last_n = v->as_int();
    if (last_n == 0) out.repetition_penalty.reset();  // llama.cpp: 0 turns the penalties off
    else if (last_n != -1 && out.repetition_penalty.value_or(1.0) != 1.0)
      refuse("penalty_last_n", "dew penalizes every token of the row (-1 in llama.cpp), not the last N; "
                               "pass --repetition-penalty to choose, or set the key to -1");
  }
  for (const char* name : {"mirostat", "xtc_probability"})
    if (const auto* v = value(name); v && v->as_float() != 0.0)
      refuse(name, "dew's sampler cannot do that; 0 turns it off");
  for (const auto& [key, v] : file.metadata()) {
    if (!key.starts_with(prefix)) continue;
    static const std::set<std::string, std::less<>> known = {
        "temp", "top_k", "top_p", "min_p", "penalty_repeat", "penalty_last_n", "mirostat", "mirostat_tau",
        "mirostat_eta", "xtc_probability", "xtc_threshold", "sequence"};
    if (!known.contains(key.substr(prefix.size())))
      fail(file.name(), ": metadata ", key, " is not a sampling setting dew knows (llama.cpp's are temp, top_k, top_p, "
           "min_p, penalty_repeat, penalty_last_n, mirostat*, xtc_*, sequence)");
  }
  return out;
}

GenerationDefaults read_generation_defaults(const fs::path& model) {
  std::error_code ec;
  if (fs::is_directory(model, ec)) {
    const fs::path file = model / "generation_config.json";
    if (fs::is_regular_file(file, ec)) return read_generation_config(file);
    return {};
  }
  if (model.extension() == ".gguf" && fs::is_regular_file(model, ec)) return read_gguf_sampling(formats::GgufFile(model));
  return {};
}

}  // namespace dew::interop
