#include "dew/data/tokenizers/json_fields.h"

#include "dew/core/error.h"

namespace dew::data {

using nlohmann::json;

void JsonFields::fail_at(const std::string& where, const std::string& message) const {
  fail(path, ": field '", where, "' ", message);
}

const json* JsonFields::find(const json& object, const char* key) const {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

const json& JsonFields::need(const json& object, const char* key, const std::string& where) const {
  const json* value = find(object, key);
  if (!value) fail(path, ": field '", where, "' is missing");
  return *value;
}

const json& JsonFields::object(const json& value, const std::string& where) const {
  if (!value.is_object()) fail_at(where, str("must be an object, not ", value.type_name()));
  return value;
}

const json& JsonFields::array(const json& value, const std::string& where) const {
  if (!value.is_array()) fail_at(where, str("must be an array, not ", value.type_name()));
  return value;
}

std::string JsonFields::string(const json& value, const std::string& where) const {
  if (!value.is_string()) fail_at(where, str("must be a string, not ", value.dump()));
  return value.get<std::string>();
}

std::string JsonFields::string_or(const json& object, const char* key, const std::string& fallback,
                                  const std::string& where) const {
  const json* value = find(object, key);
  return value ? string(*value, where) : fallback;
}

bool JsonFields::boolean_or(const json& object, const char* key, bool fallback, const std::string& where) const {
  const json* value = find(object, key);
  if (!value) return fallback;
  if (!value->is_boolean()) fail_at(where, str("must be true or false, not ", value->dump()));
  return value->get<bool>();
}

double JsonFields::number_or(const json& object, const char* key, double fallback, const std::string& where) const {
  const json* value = find(object, key);
  if (!value) return fallback;
  if (!value->is_number()) fail_at(where, str("must be a number, not ", value->dump()));
  return value->get<double>();
}

std::int64_t JsonFields::integer_or(const json& object, const char* key, std::int64_t fallback,
                                    const std::string& where) const {
  const json* value = find(object, key);
  if (!value) return fallback;
  if (!value->is_number_integer()) fail_at(where, str("must be an integer, not ", value->dump()));
  return value->get<std::int64_t>();
}

TokenId JsonFields::id(const json& value, const std::string& where) const {
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > INT32_MAX)
    fail_at(where, str("must be a token id (an integer from 0 to 2147483647), not ", value.dump()));
  return static_cast<TokenId>(value.get<std::int64_t>());
}

std::string JsonFields::type(const json& node, const std::string& where) const {
  object(node, where);
  return string(need(node, "type", where + ".type"), where + ".type");
}

void JsonFields::unknown_type(const std::string& where, const std::string& type,
                              const std::vector<std::string>& supported) const {
  std::string list;
  for (const auto& name : supported) list += (list.empty() ? "" : ", ") + name;
  fail(path, ": field '", where, ".type' is \"", type, "\", which dew does not support (supported: ", list, ")");
}

}  // namespace dew::data
