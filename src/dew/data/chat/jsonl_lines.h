#pragma once
// The one reader of JSON Lines files that chat, preference and prompt records share: one JSON object a
// line, blank lines skipped, a UTF-8 byte-order mark and Windows line ends accepted. Errors start with
// "FILE:LINE:" so a user can jump to the line.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace dew::data {

// Calls `record(object, line)` (line 1-based) for every non-blank line, in order. A line that is not
// JSON, or JSON that is not an object, is an error naming the file and line; so is a file that cannot be
// read or holds no record (`what` names the records in that message: "conversations").
void read_jsonl_lines(const std::filesystem::path& file, const std::string& what,
                      const std::function<void(const nlohmann::ordered_json& object, std::int64_t line)>& record);

// "FILE:LINE: field 'NAME' " -- the start of every record error, so they all read alike.
std::string jsonl_field_context(const std::filesystem::path& file, std::int64_t line, const std::string& field);

// A JSON value for an error message: dumped, and cut to about 60 bytes with "..." when longer.
std::string jsonl_shown(const nlohmann::ordered_json& value);

}  // namespace dew::data
