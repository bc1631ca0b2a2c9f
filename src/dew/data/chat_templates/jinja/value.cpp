#include "dew/data/chat_templates/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "dew/core/error.h"

namespace dew::data::jinja {

void Value::measure_nesting() {
  std::uint32_t deepest = 0;
  if (list_) {
    for (const Value& v : *list_) deepest = std::max(deepest, v.nesting_);
  } else if (dict_ && !dict_->is_namespace) {
    for (const auto& item : dict_->items) deepest = std::max(deepest, item.second.nesting_);
  }
  nesting_ = deepest + 1;
  if (nesting_ > kMaxNesting) fail("values nest deeper than ", kMaxNesting, " levels");
}

const void* Value::identity() const {
  if (list_) return list_.get();
  if (dict_) return dict_.get();
  if (function_) return function_.get();
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0;
    case Kind::String: return !text_.empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return dict_->is_namespace || dict_->is_loop || !dict_->items.empty();
    case Kind::Function: return true;
  }
  return false;
}

std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);  // like "-1.2345e+07"
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  std::size_t e = sci.find('e');
  int exponent = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    std::size_t point = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= point) {
      out = digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, point) + "." + digits.substr(point);
    }
  }
  return negative ? "-" + out : out;
}

std::string python_repr(std::string_view text) {
  bool has_single = text.find('\'') != std::string_view::npos;
  bool has_double = text.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : text) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return int_ ? "True" : "False";
    case Kind::Int: return std::to_string(int_);
    case Kind::Float: return python_float(float_);
    case Kind::String: return text_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::String: return python_repr(text_);
    case Kind::Undefined: return "Undefined";
    case Kind::List: {
      std::string out = tuple_ ? "(" : "[";
      for (std::size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      if (tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::Dict: {
      if (dict_->is_namespace) return "<Namespace>";
      if (dict_->is_loop) return "<LoopContext>";
      std::string out = "{";
      for (std::size_t i = 0; i < dict_->items.size(); ++i)
        out += (i ? ", " : "") + key_value(dict_->items[i].first).repr() + ": " + dict_->items[i].second.repr();
      return out + "}";
    }
    case Kind::Function: return "<function " + text_ + ">";
    default: return str();
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::Function: return "function";
  }
  return "?";
}

std::string dict_key(const Value& key) {
  switch (key.kind()) {
    case Kind::String: return key.text();
    case Kind::None: return std::string("\0n", 2);
    case Kind::Bool:
    case Kind::Int: return std::string("\0i", 2) + std::to_string(key.as_int());
    case Kind::Float: {
      double f = key.as_double();
      if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18)
        return std::string("\0i", 2) + std::to_string(static_cast<std::int64_t>(f));
      return std::string("\0f", 2) + python_float(f);
    }
    case Kind::List:
      if (key.is_tuple()) {
        std::string out("\0t", 2);
        out += key.repr();
        return out;
      }
      [[fallthrough]];
    default: fail("unhashable type: '", key.type_name(), "'");
  }
}

Value key_value(const std::string& key) {
  if (key.size() < 2 || key[0] != '\0') return Value(key);
  std::string rest = key.substr(2);
  switch (key[1]) {
    case 'n': return Value::none();
    case 'i': return Value(static_cast<std::int64_t>(std::stoll(rest)));
    case 'f': return Value(std::stod(rest));
    default: return Value(rest);  // a tuple key comes back as its repr
  }
}

std::string key_json_text(const std::string& key) {
  if (key.size() < 2 || key[0] != '\0') return key;
  if (key[1] == 'n') return "null";
  return key.substr(2);
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

Value Arguments::get(std::size_t index, const std::string& name, Value fallback) {
  for (auto& [key, value] : keyword)
    if (key == name) {
      used_names_.push_back(name);
      if (index < positional.size()) fail(callee, "() got multiple values for argument '", name, "'");
      return value;
    }
  if (index < positional.size()) {
    used_positional_ = std::max(used_positional_, index + 1);
    return positional[index];
  }
  return fallback;
}

void Arguments::finish() const {
  if (used_positional_ < positional.size())
    fail(callee, "() takes at most ", used_positional_, " positional arguments (", positional.size(), " given)");
  for (const auto& [key, value] : keyword)
    if (std::find(used_names_.begin(), used_names_.end(), key) == used_names_.end())
      fail(callee, "() got an unexpected keyword argument '", key, "'");
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return a.text() == b.text();
    case Kind::List: {
      if (a.list().size() != b.list().size()) return false;
      for (std::size_t i = 0; i < a.list().size(); ++i)
        if (!values_equal(a.list()[i], b.list()[i])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.identity() == b.identity()) return true;
      if (a.dict().is_namespace || b.dict().is_namespace) return false;
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [key, value] : a.dict().items) {
        const Value* other = b.dict().find(key);
        if (!other || !values_equal(value, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool value_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.text() < b.text();
  if (a.is_list() && b.is_list()) {
    const List &x = a.list(), &y = b.list();
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (value_less(x[i], y[i])) return true;
      if (value_less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

Value from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(json.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return Value(static_cast<std::int64_t>(json.get<std::uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::json::value_t::array: {
      List list;
      list.reserve(json.size());
      for (const auto& item : json) list.push_back(from_json(item));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      auto dict = std::make_shared<Dict>();
      dict->items.reserve(json.size());
      for (auto it = json.begin(); it != json.end(); ++it) dict->items.emplace_back(it.key(), from_json(it.value()));
      return Value(std::move(dict));
    }
    default: fail("a JSON value of type ", json.type_name(), " cannot be given to a template");
  }
}

namespace {

void json_string(std::string& out, std::string_view text, bool ensure_ascii) {
  auto hex4 = [&](unsigned v) {
    char buffer[8];
    std::snprintf(buffer, sizeof buffer, "\\u%04x", v);
    out += buffer;
  };
  out += '"';
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          hex4(c);
        } else if (c < 0x80 || !ensure_ascii) {
          out += static_cast<char>(c);
        } else {
          std::size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
          if (i + n > text.size()) n = 1;
          for (std::size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) n = 1;
          unsigned cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
          for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
          if (cp >= 0x10000) {
            cp -= 0x10000;
            hex4(0xD800 + (cp >> 10));
            hex4(0xDC00 + (cp & 0x3FF));
          } else {
            hex4(cp);
          }
          i += n - 1;
        }
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& value, int indent, bool sort_keys, bool ascii, int depth) {
  if (depth > 200) fail("tojson: the value nests deeper than 200 levels");
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * level), ' ');
  };
  const char* comma = indent < 0 ? ", " : ",";
  switch (value.kind()) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += value.as_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(value.as_int()); return;
    case Kind::Float: {
      double f = value.as_double();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : python_float(f);
      return;
    }
    case Kind::String: json_string(out, value.text(), ascii); return;
    case Kind::List: {
      const List& list = value.list();
      if (list.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (i) out += comma;
        newline(depth + 1);
        json_value(out, list[i], indent, sort_keys, ascii, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (value.dict().is_namespace || value.dict().is_loop)
        fail("tojson: Object of type ", value.type_name(), " is not JSON serializable");
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : value.dict().items) items.push_back(&item);
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return value_less(key_value(a->first), key_value(b->first)); });
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += comma;
        newline(depth + 1);
        json_string(out, key_json_text(items[i]->first), ascii);
        out += ": ";
        json_value(out, items[i]->second, indent, sort_keys, ascii, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default: fail("tojson: Object of type ", value.type_name(), " is not JSON serializable");
  }
}

}  // namespace

std::string to_json_text(const Value& value, int indent, bool sort_keys, bool ensure_ascii) {
  std::string out;
  json_value(out, value, indent, sort_keys, ensure_ascii, 0);
  return out;
}

}  // namespace dew::data::jinja
