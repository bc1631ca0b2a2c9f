#pragma once
// Typed reads of config.json fields, shared by hf_config.cpp and hf_llada.cpp (internal to interop/): a
// missing or null field is the fallback given (none = required), and a value of the wrong JSON type is an
// error naming the file, the field and the value.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"
#include "dew/nn/causal_transformer_config.h"

namespace dew::interop::detail {

class HfConfigReader {
 public:
  using Json = nlohmann::ordered_json;
  HfConfigReader(const Json& j, std::string source) : j_(j), source_(std::move(source)) {}

  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  // Present in the file, null or not (LLaDA tells a missing embedding_size from a null one).
  bool present(const std::string& key) const { return j_.contains(key); }
  const Json* get(const std::string& key) const { return has(key) ? &j_.at(key) : nullptr; }

  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = std::nullopt) const {
    const Json* v = get(key);
    if (!v) return required(key, fallback);
    if (!v->is_number_integer()) dew::fail(source_, ": field '", key, "' is ", v->dump(), "; expected an integer");
    return v->get<std::int64_t>();
  }
  double number(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    const Json* v = get(key);
    if (!v) return required(key, fallback);
    if (!v->is_number()) dew::fail(source_, ": field '", key, "' is ", v->dump(), "; expected a number");
    return v->get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_boolean()) dew::fail(source_, ": field '", key, "' is ", v->dump(), "; expected true or false");
    return v->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const Json* v = get(key);
    if (!v) return fallback;
    if (!v->is_string()) dew::fail(source_, ": field '", key, "' is ", v->dump(), "; expected a string");
    return v->get<std::string>();
  }
  const std::string& source() const { return source_; }

 private:
  template <class T>
  T required(const std::string& key, std::optional<T> fallback) const {
    if (!fallback) dew::fail(source_, ": config.json lacks the required field '", key, "'");
    return *fallback;
  }
  const Json& j_;
  std::string source_;
};

// A rope_scaling / rope_parameters object -> dew's RopeScaling (default, linear, llama3; the rest refused by
// name, as is a partial_rotary_factor other than 1: callers that compute partial rotary take it out first).
// `field` names the object in errors.
nn::RopeScaling read_rope_scaling(const nlohmann::ordered_json& params, const std::string& field, const std::string& source);

// A masked-diffusion checkpoint's mask id: mask_token_id (LLaDA, Dream), or mask_id as some conversions spell
// it. Required: without it dew could not tell which id marks a masked position.
inline std::int64_t read_mask_token_id(const HfConfigReader& r, std::int64_t vocab_size, const std::string& family) {
  const char* key = r.has("mask_token_id") ? "mask_token_id" : r.has("mask_id") ? "mask_id" : nullptr;
  if (!key) {
    dew::fail(r.source(), ": config.json has no mask_token_id (nor mask_id); a ", family,
              " checkpoint names the id of its mask token there (LLaDA-8B: 126336, Dream-v0-7B: 151666); add it");
  }
  auto id = r.integer(key);
  if (id < 0 || id >= vocab_size) {
    dew::fail(r.source(), ": ", key, " is ", id, " but token ids are in [0, ", vocab_size, ") (the vocabulary)");
  }
  return id;
}

}  // namespace dew::interop::detail
