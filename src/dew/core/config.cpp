#include "dew/core/config.h"

#include "dew/core/atomic_file.h"

namespace dew::config {

std::string json_kind(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "a list";
    case Json::value_t::object: return "an object";
    default: return "an unsupported value";
  }
}

std::string join_path(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

void wrong_type(const Json& j, const std::string& path, const std::string& source, const char* expected) {
  auto shown = j.dump();
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  fail("config field '", path.empty() ? "(root)" : path, "' in ", source, " must be ", expected, ", got ", shown,
       " (", json_kind(j), ")");
}

namespace {
std::string list_known(const std::set<std::string>& known) {
  std::string out;
  for (const auto& k : known) out += (out.empty() ? "" : ", ") + k;
  return out;
}
}  // namespace

void refuse_unknown_fields(const Json& j, const std::set<std::string>& known, const std::string& prefix,
                           const std::string& source) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!known.count(it.key())) {
      fail("config field '", join_path(prefix, it.key()), "' in ", source, " does not exist; known fields",
           prefix.empty() ? "" : " of '" + prefix + "'", ": ", list_known(known));
    }
  }
}

Json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // nlohmann reports a byte offset; turn it into line:column, which editors understand.
    std::size_t offset = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    auto pos = what.find("syntax error");
    fail("'", source, "' is not valid JSON at line ", line, ", column ", column, ": ",
         pos == std::string::npos ? what : what.substr(pos));
  }
}

Json parse_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_file(path), path.string());
}

void merge_into(Json& base, const Json& patch) {
  if (base.is_object() && patch.is_object()) {
    for (auto it = patch.begin(); it != patch.end(); ++it) {
      if (base.contains(it.key())) {
        merge_into(base[it.key()], it.value());
      } else {
        base[it.key()] = it.value();
      }
    }
  } else {
    base = patch;
  }
}

void apply_override(Json& root, std::string_view assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    fail("--set '", assignment, "' must have the form key=value, for example trainer.steps=100");
  }
  std::string key(assignment.substr(0, eq));
  std::string text(assignment.substr(eq + 1));
  Json* node = &root;
  std::string walked;
  std::size_t start = 0;
  while (true) {
    auto dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(part)) {
      std::set<std::string> known;
      if (node->is_object()) {
        for (auto it = node->begin(); it != node->end(); ++it) known.insert(it.key());
      }
      fail("--set ", key, ": config field '", join_path(walked, part), "' does not exist",
           known.empty() ? std::string() : "; known fields" + (walked.empty() ? std::string() : " of '" + walked + "'") +
                                               ": " + list_known(known));
    }
    node = &(*node)[part];
    walked = join_path(walked, part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (node->is_object()) {
    // A whole section (or a map field such as model.kinds) may be given as a JSON object.
    Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      *node = parsed;
      return;
    }
    fail("--set ", key, ": '", key, "' is a section; set one of its fields, like ", key,
         ".NAME=value, or give a JSON object");
  }
  if (node->is_string() && !(text.size() >= 2 && text.front() == '"' && text.back() == '"')) {
    *node = text;
    return;
  }
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  *node = parsed.is_discarded() ? Json(text) : parsed;
}

}  // namespace dew::config
