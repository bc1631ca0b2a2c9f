#include "dew/serve/request_fields.h"

#include <cmath>
#include <limits>

#include "dew/core/error.h"
#include "dew/serve/api_error.h"

namespace dew::serve {

std::string describe_value(const nlohmann::json& value) {
  constexpr std::size_t kLongest = 80;
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kLongest) {
    text.resize(kLongest);
    text += "...";
  }
  return text;
}

std::string describe_type(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a number";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    default: return "an unsupported value";
  }
}

const nlohmann::json* find_field(const nlohmann::json& body, const std::string& name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {
[[noreturn]] void wrong_type(const std::string& name, const nlohmann::json& value, const std::string& wanted) {
  invalid_field(name, str("'", name, "' must be ", wanted, ", got ", describe_type(value), " (", describe_value(value), ")"),
                "invalid_type");
}
}  // namespace

std::optional<bool> read_bool(const nlohmann::json& body, const std::string& name) {
  const auto* field = find_field(body, name);
  if (!field) return std::nullopt;
  if (!field->is_boolean()) wrong_type(name, *field, "true or false");
  return field->get<bool>();
}

std::optional<std::string> read_string(const nlohmann::json& body, const std::string& name) {
  const auto* field = find_field(body, name);
  if (!field) return std::nullopt;
  if (!field->is_string()) wrong_type(name, *field, "a string");
  return field->get<std::string>();
}

std::optional<double> read_number(const nlohmann::json& body, const std::string& name, double low, double high) {
  const auto* field = find_field(body, name);
  if (!field) return std::nullopt;
  if (!field->is_number()) wrong_type(name, *field, str("a number from ", low, " to ", high));
  double value = field->get<double>();
  // !(low <= value) rather than value < low, so NaN is refused too (nlohmann never yields NaN, but a
  // future parser might).
  if (!(value >= low && value <= high && std::isfinite(value))) {
    invalid_field(name, str("'", name, "' is ", describe_value(*field), "; use a number from ", low, " to ", high));
  }
  return value;
}

std::optional<std::int64_t> read_integer(const nlohmann::json& body, const std::string& name, std::int64_t low,
                                         std::int64_t high) {
  const auto* field = find_field(body, name);
  if (!field) return std::nullopt;
  std::int64_t value = 0;
  bool out_of_range = false;
  if (field->is_number_unsigned()) {
    auto wide = field->get<std::uint64_t>();
    out_of_range = wide > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    value = out_of_range ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(wide);
  } else if (field->is_number_integer()) {
    value = field->get<std::int64_t>();
  } else if (field->is_number_float()) {
    double wide = field->get<double>();
    if (wide != std::floor(wide) || !std::isfinite(wide)) wrong_type(name, *field, "an integer");
    out_of_range = !(wide >= -9.2e18 && wide <= 9.2e18);
    value = out_of_range ? 0 : static_cast<std::int64_t>(wide);
  } else {
    wrong_type(name, *field, str("an integer from ", low, " to ", high));
  }
  if (out_of_range || value < low || value > high) {
    invalid_field(name, str("'", name, "' is ", describe_value(*field), "; use an integer from ", low, " to ", high));
  }
  return value;
}

}  // namespace dew::serve
