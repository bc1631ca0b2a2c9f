#pragma once
// Plain config structs that round-trip through JSON.
//
// A config struct lists its fields once, in a `fields` member template:
//
//   struct TokenizeConfig {
//     std::string input;
//     double val_fraction = 0.01;
//     template <class V> void fields(V& v) {
//       v("input", input, "text file or directory of *.txt files");
//       v("val_fraction", val_fraction, "fraction of tokens held out for validation (the stream's head)");
//     }
//   };
//
// From that one list come to_json, from_json (which refuses, by name, a field that does not exist and a
// value of the wrong type), `--set a.b=value` overrides and the field listing printed by `--help`.
// Field types: bool, integers, floating point, std::string, std::vector, std::optional and
// std::map<std::string, _> of those, and nested config structs.
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"

namespace dew::config {

using Json = nlohmann::ordered_json;

// Used only to detect config structs: accepts any field.
struct FieldProbe {
  template <class X>
  void operator()(const char*, X&, const char* = "") {}
};

template <class T>
concept ConfigStruct = requires(T& t, FieldProbe& probe) { t.fields(probe); };

std::string json_kind(const Json& j);  // "string", "integer", ... for error messages
std::string join_path(const std::string& prefix, const std::string& name);

template <class T>
struct is_vector : std::false_type {};
template <class E>
struct is_vector<std::vector<E>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class E>
struct is_string_map<std::map<std::string, E>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class E>
struct is_optional<std::optional<E>> : std::true_type {};

// ---- to JSON ----------------------------------------------------------------------------------------
template <class T>
Json value_to_json(const T& value);

struct ToJsonVisitor {
  Json& out;
  template <class X>
  void operator()(const char* name, X& value, const char* = "") {
    out[name] = value_to_json(value);
  }
};

template <class T>
Json value_to_json(const T& value) {
  if constexpr (ConfigStruct<T>) {
    Json out = Json::object();
    ToJsonVisitor visitor{out};
    const_cast<T&>(value).fields(visitor);
    return out;
  } else if constexpr (is_optional<T>::value) {
    return value ? value_to_json(*value) : Json(nullptr);
  } else if constexpr (is_string_map<T>::value) {
    Json out = Json::object();
    for (const auto& [key, element] : value) out[key] = value_to_json(element);
    return out;
  } else if constexpr (is_vector<T>::value) {
    Json out = Json::array();
    for (const auto& element : value) out.push_back(value_to_json(element));
    return out;
  } else {
    return Json(value);
  }
}

template <ConfigStruct T>
Json to_json(const T& config) {
  return value_to_json(config);
}

// ---- from JSON --------------------------------------------------------------------------------------
template <class T>
void value_from_json(const Json& j, T& value, const std::string& path, const std::string& source);

[[noreturn]] void wrong_type(const Json& j, const std::string& path, const std::string& source,
                             const char* expected);

struct FromJsonVisitor {
  const Json& in;
  std::string prefix;
  std::string source;
  std::set<std::string> known;
  template <class X>
  void operator()(const char* name, X& value, const char* = "") {
    known.insert(name);
    auto it = in.find(name);
    if (it != in.end()) value_from_json(*it, value, join_path(prefix, name), source);
  }
};

void refuse_unknown_fields(const Json& j, const std::set<std::string>& known, const std::string& prefix,
                           const std::string& source);

template <class T>
void value_from_json(const Json& j, T& value, const std::string& path, const std::string& source) {
  if constexpr (ConfigStruct<T>) {
    if (!j.is_object()) wrong_type(j, path, source, "an object");
    FromJsonVisitor visitor{j, path, source, {}};
    value.fields(visitor);
    refuse_unknown_fields(j, visitor.known, path, source);
  } else if constexpr (is_optional<T>::value) {
    if (j.is_null()) {
      value.reset();
    } else {
      typename T::value_type inner{};
      value_from_json(j, inner, path, source);
      value = std::move(inner);
    }
  } else if constexpr (is_string_map<T>::value) {
    if (!j.is_object()) wrong_type(j, path, source, "an object");
    T out;
    for (auto it = j.begin(); it != j.end(); ++it) {
      typename T::mapped_type element{};
      value_from_json(it.value(), element, join_path(path, it.key()), source);
      out.emplace(it.key(), std::move(element));
    }
    value = std::move(out);
  } else if constexpr (is_vector<T>::value) {
    if (!j.is_array()) wrong_type(j, path, source, "a list");
    T out;
    for (std::size_t i = 0; i < j.size(); ++i) {
      typename T::value_type element{};
      value_from_json(j[i], element, str(path, "[", i, "]"), source);
      out.push_back(std::move(element));
    }
    value = std::move(out);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) wrong_type(j, path, source, "true or false");
    value = j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) wrong_type(j, path, source, "an integer");
    if (j.is_number_unsigned()) {
      auto v = j.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) wrong_type(j, path, source, "a smaller integer");
      value = static_cast<T>(v);
    } else {
      auto v = j.get<std::int64_t>();
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          (v > 0 && static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))) {
        wrong_type(j, path, source, std::is_signed_v<T> ? "an integer in range" : "a non-negative integer");
      }
      value = static_cast<T>(v);
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) wrong_type(j, path, source, "a number");
    value = j.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) wrong_type(j, path, source, "a string");
    value = j.get<std::string>();
  } else {
    static_assert(sizeof(T) == 0, "unsupported config field type");
  }
}

// Fills `config` from `j`; `source` names where the JSON came from (a file path, "--set") for errors.
template <ConfigStruct T>
void from_json(const Json& j, T& config, const std::string& source) {
  value_from_json(j, config, "", source);
}

// ---- files and overrides ----------------------------------------------------------------------------
Json parse_json_file(const std::filesystem::path& path);  // errors name the file, line and column
Json parse_json_text(std::string_view text, const std::string& source);

// Deep-merges `patch` into `base` (objects merge, everything else replaces).
void merge_into(Json& base, const Json& patch);

// Applies one "a.b.c=value" assignment. The path must exist in `root` (which holds every field with its
// default), else the error names the field and lists the known ones. The value is read as JSON (numbers,
// true/false, lists) except where the field holds a string, which takes the text as it is.
void apply_override(Json& root, std::string_view assignment);

// The usual way a command builds its config: defaults, then the config file, then each --set in order.
template <ConfigStruct T>
T load(const std::optional<std::filesystem::path>& file, const std::vector<std::string>& overrides,
       T defaults = T{}) {
  Json merged = to_json(defaults);
  std::string source = "the defaults";
  if (file) {
    Json from_file = parse_json_file(*file);
    if (!from_file.is_object()) fail("config file '", file->string(), "' must hold a JSON object");
    T checked = defaults;  // refuse unknown fields with the file's name before merging
    from_json(from_file, checked, file->string());
    merge_into(merged, from_file);
    source = file->string();
  }
  for (const auto& assignment : overrides) apply_override(merged, assignment);
  T config = defaults;
  from_json(merged, config, overrides.empty() ? source : source + " with --set overrides");
  return config;
}

// Lists every field as "a.b  (default)  help" lines, for --help texts.
struct DescribeVisitor {
  std::vector<std::string>& lines;
  std::string prefix;
  template <class X>
  void operator()(const char* name, X& value, const char* help = "") {
    auto path = join_path(prefix, name);
    if constexpr (ConfigStruct<X>) {
      DescribeVisitor inner{lines, path};
      value.fields(inner);
    } else {
      lines.push_back(str("  ", path, " = ", value_to_json(value).dump(), "    ", help));
    }
  }
};

template <ConfigStruct T>
std::string describe(T defaults = T{}) {
  std::vector<std::string> lines;
  DescribeVisitor visitor{lines, ""};
  defaults.fields(visitor);
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

}  // namespace dew::config
