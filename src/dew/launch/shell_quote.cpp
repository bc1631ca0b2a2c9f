#include "dew/launch/shell_quote.h"

namespace dew::launch {

namespace {
// Characters that mean nothing to sh, bash or zsh inside a word, so NAME=VALUE pairs and paths print
// unquoted and stay readable.
bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == '/' || c == ':' || c == ',' || c == '+' || c == '=' || c == '@';
}
}  // namespace

std::string shell_quote(std::string_view word) {
  // A leading '=' is zsh's command-path expansion (=ls is /bin/ls), so only later ones go unquoted.
  bool needs_quotes = word.empty() || word.front() == '=';
  for (char c : word) needs_quotes = needs_quotes || !plain(c);
  if (!needs_quotes) return std::string(word);
  // Inside single quotes nothing is special but the closing quote, so a ' ends the quoted part, is
  // written escaped, and a new quoted part begins.
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(word);
  }
  return out;
}

}  // namespace dew::launch
