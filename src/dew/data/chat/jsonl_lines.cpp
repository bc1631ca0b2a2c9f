#include "dew/data/chat/jsonl_lines.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "dew/core/error.h"

namespace dew::data {

void read_jsonl_lines(const std::filesystem::path& file, const std::string& what,
                      const std::function<void(const nlohmann::ordered_json&, std::int64_t)>& record) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) dew::fail("'", file.string(), "' is a directory; expected a .jsonl file");
  std::ifstream in(file, std::ios::binary);
  if (!in) dew::fail("cannot read '", file.string(), "': ", std::strerror(errno));
  std::string text;
  std::int64_t line = 0, records = 0;
  while (std::getline(in, text)) {
    ++line;
    if (line == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // editors on Windows add a BOM
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    nlohmann::ordered_json object;
    try {
      object = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      // nlohmann's message ends with where in the line the parser stopped, which is what a user needs.
      std::string reason = e.what();
      if (auto colon = reason.find("parse error"); colon != std::string::npos) reason = reason.substr(colon);
      dew::fail(file.string(), ":", line, ": not JSON (", reason, "); each line must hold one JSON object");
    }
    if (!object.is_object()) {
      dew::fail(file.string(), ":", line, ": holds ", jsonl_shown(object), "; each line must hold one JSON object");
    }
    record(object, line);
    ++records;
  }
  if (in.bad()) dew::fail("cannot read '", file.string(), "': I/O error");
  if (records == 0) dew::fail("'", file.string(), "' holds no ", what, " (no non-blank line)");
}

std::string jsonl_field_context(const std::filesystem::path& file, std::int64_t line, const std::string& field) {
  return dew::str(file.string(), ":", line, ": field '", field, "' ");
}

std::string jsonl_shown(const nlohmann::ordered_json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) {
    std::size_t cut = 57;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
    text = text.substr(0, cut) + "...";
  }
  return text;
}

}  // namespace dew::data
