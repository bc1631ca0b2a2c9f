#pragma once
// Template text -> tokens, with jinja2's whitespace rules as transformers configures them: newlines
// normalised to \n, one trailing newline dropped (keep_trailing_newline=False), "-" on a tag strips the
// whitespace beside it, trim_blocks drops the newline after a block or comment tag, lstrip_blocks drops
// the spaces and tabs before a block or comment tag that starts its line ("+" turns either off).
#include <string>
#include <string_view>
#include <vector>

namespace dew::data::jinja {

enum class TokenType { Text, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };

struct Token {
  TokenType type;
  std::string text;  // Text: the data; String: the unescaped value; others: as written
  int line;
};

// `name` prefixes syntax errors ("<name>:<line>: ...").
std::vector<Token> tokenize(std::string_view source, const std::string& name);

}  // namespace dew::data::jinja
