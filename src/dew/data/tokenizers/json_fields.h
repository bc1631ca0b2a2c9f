#pragma once
// Reading tokenizer.json components: every error names the file, the field (a path like
// "pre_tokenizer.pretokenizers[1].behavior") and the value, and says what is accepted.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

struct JsonFields {
  std::string path;  // the file, as errors name it

  [[noreturn]] void fail_at(const std::string& where, const std::string& message) const;
  const nlohmann::json* find(const nlohmann::json& object, const char* key) const;  // null JSON counts as absent
  const nlohmann::json& need(const nlohmann::json& object, const char* key, const std::string& where) const;
  const nlohmann::json& object(const nlohmann::json& value, const std::string& where) const;
  const nlohmann::json& array(const nlohmann::json& value, const std::string& where) const;
  std::string string(const nlohmann::json& value, const std::string& where) const;
  std::string string_or(const nlohmann::json& object, const char* key, const std::string& fallback,
                        const std::string& where) const;
  bool boolean_or(const nlohmann::json& object, const char* key, bool fallback, const std::string& where) const;
  double number_or(const nlohmann::json& object, const char* key, double fallback, const std::string& where) const;
  std::int64_t integer_or(const nlohmann::json& object, const char* key, std::int64_t fallback,
                          const std::string& where) const;
  TokenId id(const nlohmann::json& value, const std::string& where) const;
  // The component's "type"; an error when absent.
  std::string type(const nlohmann::json& node, const std::string& where) const;
  // The error for a "type" this reader does not know, listing the ones it does.
  [[noreturn]] void unknown_type(const std::string& where, const std::string& type,
                                 const std::vector<std::string>& supported) const;
};

}  // namespace dew::data
