#include "dew/data/chat_templates/jinja/text.h"

#include <cctype>
#include <cstdio>

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/builtins.h"

namespace dew::data::jinja::text {

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f);
}

std::string strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::size_t begin = 0, end = s.size();
  if (chars.is_undefined() || chars.is_none()) {
    if (left)
      while (begin < end && is_py_space(s[begin])) ++begin;
    if (right)
      while (end > begin && is_py_space(s[end - 1])) --end;
    return std::string(s.substr(begin, end - begin));
  }
  if (!chars.is_string()) fail("strip arg must be None or str, not ", chars.type_name());
  std::vector<std::string> set = code_points(chars.text());
  std::vector<std::string> cps = code_points(s);
  std::size_t b = 0, e = cps.size();
  auto in_set = [&](const std::string& cp) { return std::find(set.begin(), set.end(), cp) != set.end(); };
  if (left)
    while (b < e && in_set(cps[b])) ++b;
  if (right)
    while (e > b && in_set(cps[e - 1])) --e;
  std::string out;
  for (std::size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

std::vector<std::string> split(std::string_view s, const Value& sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_undefined() || sep.is_none()) {
    std::size_t i = 0;
    while (true) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        std::size_t end = s.size();
        while (end > i && is_py_space(s[end - 1])) --end;
        out.emplace_back(s.substr(i, end - i));
        break;
      }
      std::size_t j = i;
      while (j < s.size() && !is_py_space(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) fail("must be str or None, not ", sep.type_name());
  if (sep.text().empty()) fail("empty separator");
  std::size_t i = 0;
  while (true) {
    std::size_t j = s.find(sep.text(), i);
    if (j == std::string_view::npos || (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit)) {
      out.emplace_back(s.substr(i));
      return out;
    }
    out.emplace_back(s.substr(i, j - i));
    i = j + sep.text().size();
  }
}

std::vector<std::string> rsplit(std::string_view s, const Value& sep, std::int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  if (sep.is_undefined() || sep.is_none()) {
    std::vector<std::string> out;
    std::size_t end = s.size();
    while (true) {
      while (end > 0 && is_py_space(s[end - 1])) --end;
      if (end == 0) break;
      if (static_cast<std::int64_t>(out.size()) == maxsplit) {
        std::size_t b = 0;
        while (b < end && is_py_space(s[b])) ++b;
        out.emplace_back(s.substr(b, end - b));
        break;
      }
      std::size_t j = end;
      while (j > 0 && !is_py_space(s[j - 1])) --j;
      out.emplace_back(s.substr(j, end - j));
      end = j;
    }
    return {out.rbegin(), out.rend()};
  }
  if (!sep.is_string()) fail("must be str or None, not ", sep.type_name());
  const std::string& d = sep.text();
  if (d.empty()) fail("empty separator");
  std::vector<std::string> out;
  std::size_t end = s.size();
  while (true) {
    std::size_t j = end >= d.size() ? s.rfind(d, end - d.size()) : std::string_view::npos;
    if (j == std::string_view::npos || static_cast<std::int64_t>(out.size()) == maxsplit) {
      out.emplace_back(s.substr(0, end));
      break;
    }
    out.emplace_back(s.substr(j + d.size(), end - j - d.size()));
    end = j;
  }
  return {out.rbegin(), out.rend()};
}

std::string replace(std::string_view s, std::string_view old, std::string_view replacement, std::int64_t count,
                    std::size_t limit) {
  std::string out;
  std::int64_t done = 0;
  auto grow = [&](std::string_view piece) {
    if (out.size() + piece.size() > limit) fail("replace: the result would exceed ", limit, " bytes");
    out += piece;
  };
  if (old.empty()) {
    std::vector<std::string> cps = code_points(s);
    for (const std::string& cp : cps) {
      if (count < 0 || done < count) {
        grow(replacement);
        ++done;
      }
      grow(cp);
    }
    if (count < 0 || done < count) grow(replacement);
    return out;
  }
  std::size_t i = 0;
  while (true) {
    std::size_t j = (count >= 0 && done >= count) ? std::string_view::npos : s.find(old, i);
    if (j == std::string_view::npos) {
      grow(s.substr(i));
      return out;
    }
    grow(s.substr(i, j - i));
    grow(replacement);
    ++done;
    i = j + old.size();
  }
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string capitalize(std::string_view s) {
  std::string out = lower(std::string(s));
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string py_title(std::string_view s) {
  std::string out(s);
  bool previous_cased = false;
  for (char& c : out) {
    bool cased = std::isalpha(static_cast<unsigned char>(c));
    if (cased) c = static_cast<char>(previous_cased ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c)));
    previous_cased = cased || (static_cast<unsigned char>(c) >= 0x80 && previous_cased);
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (char c : s) {
    bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_py_space(c);
    if (separator) {
      out += c;
      word_start = true;
    } else {
      out += static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      word_start = false;
    }
  }
  return out;
}

std::vector<std::string> splitlines(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0, start = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
      out.emplace_back(s.substr(start, i - start));
      if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = ++i;
    } else {
      ++i;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string format(std::string_view pattern, const Arguments& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < pattern.size() && pattern[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      std::size_t end = pattern.find('}', i);
      if (end == std::string_view::npos) fail("str.format: a '{' without its '}'");
      std::string field(pattern.substr(i + 1, end - i - 1));
      if (field.find_first_of(":!") != std::string::npos) fail("str.format: format specs are not supported ('", field, "')");
      const Value* value = nullptr;
      if (field.empty()) {
        if (auto_index >= args.positional.size()) fail("str.format: not enough positional arguments");
        value = &args.positional[auto_index++];
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        std::size_t index = std::stoul(field);
        if (index >= args.positional.size()) fail("str.format: no positional argument ", index);
        value = &args.positional[index];
      } else {
        for (const auto& [key, v] : args.keyword)
          if (key == field) value = &v;
        if (!value) fail("str.format: no argument named '", field, "'");
      }
      out += value->str();
      i = end;
    } else if (c == '}') {
      fail("str.format: single '}' encountered");
    } else {
      out += c;
    }
  }
  return out;
}

std::string percent_format(std::string_view pattern, const List& args) {
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    // %[flags][width][.precision]conversion, as Python's printf-style formatting.
    std::size_t spec_start = i;
    ++i;
    while (i < pattern.size() && std::string_view("-+ 0#").find(pattern[i]) != std::string_view::npos) ++i;
    while (i < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[i]))) ++i;
    if (i < pattern.size() && pattern[i] == '.') {
      ++i;
      while (i < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[i]))) ++i;
    }
    if (i >= pattern.size()) fail("format: incomplete format");
    char conversion = pattern[i];
    std::string flags(pattern.substr(spec_start + 1, i - spec_start - 1));
    if (flags.size() > 8) fail("format: the field '%", flags, conversion, "' is too wide");
    // '#' means nothing defined for %s and %d in C; Python's alternate forms are not supported.
    if (flags.find('#') != std::string::npos) fail("format: the '#' flag is not supported");
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) fail("format: not enough arguments for format string");
    const Value& v = args[next++];
    char buffer[512];
    if (conversion == 's' || conversion == 'r') {
      std::string text = conversion == 's' ? v.str() : v.repr();
      std::string f = "%" + flags + "s";
      if (flags.empty()) {
        out += text;
      } else {
        std::snprintf(buffer, sizeof buffer, f.c_str(), text.c_str());
        out += buffer;
      }
    } else if (conversion == 'd' || conversion == 'i') {
      if (!v.is_number()) fail("format: %", conversion, " format: a real number is required, not ", v.type_name());
      long long n = v.kind() == Kind::Float ? static_cast<long long>(v.as_double()) : v.as_int();
      std::string f = "%" + flags + "lld";
      std::snprintf(buffer, sizeof buffer, f.c_str(), n);
      out += buffer;
    } else if (conversion == 'f' || conversion == 'e' || conversion == 'g') {
      if (!v.is_number()) fail("format: must be real number, not ", v.type_name());
      std::string f = "%" + flags + conversion;
      std::snprintf(buffer, sizeof buffer, f.c_str(), v.as_double());
      out += buffer;
    } else {
      fail("format: unsupported format character '", conversion, "'");
    }
  }
  if (next < args.size()) fail("format: not all arguments converted during string formatting");
  return out;
}

}  // namespace dew::data::jinja::text
