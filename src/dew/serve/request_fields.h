#pragma once
// Typed readers for the fields of a JSON request body. Each names the field and the value it got when
// the type or range is wrong (an ApiError 400 with `param` set), and treats an absent field and JSON null
// alike, as the OpenAI API does for optional parameters. Unknown fields are never looked at: ignored.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dew::serve {

// A short, printable rendering of a JSON value for error messages (long values cut with "...").
std::string describe_value(const nlohmann::json& value);
// "a string", "an integer", "an array", ... for "must be X, got Y" messages.
std::string describe_type(const nlohmann::json& value);

// The field when present and not null.
const nlohmann::json* find_field(const nlohmann::json& body, const std::string& name);

std::optional<bool> read_bool(const nlohmann::json& body, const std::string& name);
std::optional<std::string> read_string(const nlohmann::json& body, const std::string& name);
// A finite number in [low, high].
std::optional<double> read_number(const nlohmann::json& body, const std::string& name, double low, double high);
// An integer in [low, high] (2.0 is accepted as 2; 2.5 is not).
std::optional<std::int64_t> read_integer(const nlohmann::json& body, const std::string& name, std::int64_t low,
                                         std::int64_t high);

}  // namespace dew::serve
