#pragma once
// Python's str methods over UTF-8 text, as the filters and methods use them. Case mapping is ASCII only
// (chat templates apply it to role names and keywords).
#include <string>
#include <string_view>
#include <vector>

#include "dew/data/chat_templates/jinja/value.h"

namespace dew::data::jinja::text {

bool is_py_space(char c);
std::string strip(std::string_view s, const Value& chars, bool left, bool right);
std::vector<std::string> split(std::string_view s, const Value& sep, std::int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const Value& sep, std::int64_t maxsplit);
std::string replace(std::string_view s, std::string_view old, std::string_view replacement, std::int64_t count,
                    std::size_t limit);
std::string upper(std::string s);
std::string lower(std::string s);
std::string capitalize(std::string_view s);
std::string py_title(std::string_view s);     // str.title()
std::string jinja_title(std::string_view s);  // the title filter: words begin after - space ( { [ <
std::vector<std::string> splitlines(std::string_view s);
// str.format with {} / {0} / {name} fields (no format specs).
std::string format(std::string_view pattern, const Arguments& args);
// "%s" % args: the format filter (s, d, i, r, f and %% only).
std::string percent_format(std::string_view pattern, const List& args);

}  // namespace dew::data::jinja::text
