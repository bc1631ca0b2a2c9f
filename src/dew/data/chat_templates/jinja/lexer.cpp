#include "dew/data/chat_templates/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "dew/core/error.h"

namespace dew::data::jinja {
namespace {

// Python's str.isspace for the ASCII range, which rstrip() and \s use.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1f);
}

std::string normalise_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name) : src_(normalise_newlines(source)), name_(name) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      std::size_t start = find_tag(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      if (start == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      char kind = src_[start + 1];  // '{', '%' or '#'
      char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        std::size_t line_start = text.rfind('\n');
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        if ((line_start > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<long>(line_start), text.end(), [](char c) { return c == ' ' || c == '\t'; }))
          text.resize(line_start);
      }
      emit_text(std::move(text));
      advance_to(start);
      std::size_t body = start + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      if (kind == '#') {
        std::size_t end = src_.find("#}", body);
        if (end == std::string::npos) error("missing end of comment tag");
        bool strip = end > body && src_[end - 1] == '-';
        bool keep = end > body && src_[end - 1] == '+';
        advance_to(end + 2);
        line_starting = finish_tag(strip, keep, true);
        continue;
      }
      if (kind == '%' && try_raw(body, line_starting)) continue;
      advance_to(body);
      tokens_.push_back({kind == '{' ? TokenType::VariableBegin : TokenType::BlockBegin, "", line_});
      line_starting = lex_tag(kind == '{' ? '}' : '%');
    }
    tokens_.push_back({TokenType::End, "", line_});
    return std::move(tokens_);
  }

 private:
  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void advance_to(std::size_t to) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<long>(pos_), src_.begin() + static_cast<long>(to), '\n'));
    pos_ = to;
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({TokenType::Text, std::move(text), line_});
  }

  // After a tag's closing delimiter: strip following whitespace ("-") or, for block and comment tags
  // under trim_blocks, one newline. Returns whether the consumed text ends with a newline.
  bool finish_tag(bool strip, bool keep, bool block) {
    std::size_t from = pos_;
    if (strip) {
      std::size_t end = pos_;
      while (end < src_.size() && is_space(src_[end])) ++end;
      advance_to(end);
    } else if (block && !keep && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
    return pos_ > from && src_[pos_ - 1] == '\n';
  }

  // {% raw %}...{% endraw %}: the body is text.
  bool try_raw(std::size_t body, bool& line_starting) {
    std::size_t i = body;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    while (i < src_.size() && is_space(src_[i])) ++i;
    bool strip_after_open = i < src_.size() && src_[i] == '-';
    if (strip_after_open) ++i;
    if (src_.compare(i, 2, "%}") != 0) return false;
    std::size_t content = i + 2;
    for (std::size_t j = src_.find("{%", content); j != std::string::npos; j = src_.find("{%", j + 2)) {
      std::size_t k = j + 2;
      bool strip_before = k < src_.size() && src_[k] == '-';
      if (strip_before || (k < src_.size() && src_[k] == '+')) ++k;
      while (k < src_.size() && is_space(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      while (k < src_.size() && is_space(src_[k])) ++k;
      bool strip_after = k < src_.size() && src_[k] == '-';
      if (strip_after) ++k;
      if (src_.compare(k, 2, "%}") != 0) continue;
      std::size_t text_begin = content;
      if (strip_after_open)
        while (text_begin < j && is_space(src_[text_begin])) ++text_begin;
      std::string text = src_.substr(text_begin, j - text_begin);
      if (strip_before)
        while (!text.empty() && is_space(text.back())) text.pop_back();
      advance_to(text_begin);
      emit_text(std::move(text));
      advance_to(k + 2);
      line_starting = finish_tag(strip_after, false, true);
      return true;
    }
    error("missing {% endraw %}");
  }

  // Tokens up to the tag's end ("}}" or "%}"); returns line_starting for the text after it.
  bool lex_tag(char closer) {
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) error(closer == '}' ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      if (depth == 0) {
        std::size_t p = pos_;
        bool strip = src_[p] == '-', keep = src_[p] == '+';
        if (strip || (keep && closer == '%')) ++p;
        if (p + 1 < src_.size() && src_[p] == closer && src_[p + 1] == '}') {
          tokens_.push_back({closer == '}' ? TokenType::VariableEnd : TokenType::BlockEnd, "", line_});
          advance_to(p + 2);
          return finish_tag(strip, keep, closer == '%');
        }
      }
      char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t end = pos_;
        while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
        tokens_.push_back({TokenType::Name, src_.substr(pos_, end - pos_), line_});
        pos_ = end;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op(1, c);
        for (const char* t : two)
          if (src_.compare(pos_, 2, t) == 0) op = t;
        if (op.size() == 1 && std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
          error(str("unexpected char '", c, "'"));
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && --depth < 0) error(str("unexpected '", op, "'"));
        tokens_.push_back({TokenType::Operator, op, line_});
        pos_ += op.size();
      }
    }
  }

  void lex_number() {
    std::size_t end = pos_;
    auto digits = [&] {
      while (end < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[end])) ||
                                   (src_[end] == '_' && end + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end + 1])))))
        ++end;
    };
    digits();
    bool is_float = false;
    bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::Operator && tokens_.back().text == ".";
    if (!after_dot) {
      if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
        ++end;
        digits();
        is_float = true;
      }
      if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
        std::size_t e = end + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
          end = e;
          digits();
          is_float = true;
        }
      }
    }
    std::string text = src_.substr(pos_, end - pos_);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? TokenType::Float : TokenType::Integer, text, line_});
    pos_ = end;
  }

  void lex_string(char quote) {
    int start_line = line_;
    std::string value;
    std::size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) error("unexpected end of string");
      char c = src_[i];
      if (c == quote) break;
      if (c == '\\' && i + 1 < src_.size()) {
        char e = src_[i + 1];
        i += 2;
        switch (e) {
          case 'n': value += '\n'; break;
          case 't': value += '\t'; break;
          case 'r': value += '\r'; break;
          case '\\': value += '\\'; break;
          case '\'': value += '\''; break;
          case '"': value += '"'; break;
          case 'a': value += '\a'; break;
          case 'b': value += '\b'; break;
          case 'f': value += '\f'; break;
          case 'v': value += '\v'; break;
          case '0': value += '\0'; break;
          case '\n': break;
          case 'x':
          case 'u':
          case 'U': {
            std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (i + n > src_.size() ||
                !std::all_of(src_.begin() + static_cast<long>(i), src_.begin() + static_cast<long>(i + n), [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); }))
              error(str("truncated \\", e, " escape in a string"));
            unsigned long cp = std::stoul(src_.substr(i, n), nullptr, 16);
            if (cp > 0x10FFFF) error("a \\U escape beyond U+10FFFF");
            append_utf8(value, cp);
            i += n;
            break;
          }
          default: value += '\\'; value += e;
        }
        continue;
      }
      value += c;
      ++i;
    }
    tokens_.push_back({TokenType::String, std::move(value), start_line});
    advance_to(i + 1);
  }

  [[noreturn]] void error(const std::string& message) const { fail(name_, ":", line_, ": syntax error: ", message); }

  std::string src_;
  const std::string& name_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const std::string& name) { return Lexer(source, name).run(); }

}  // namespace dew::data::jinja
