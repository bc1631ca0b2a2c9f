#include "dew/data/chat_templates/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/interpreter.h"
#include "dew/data/chat_templates/jinja/text.h"

namespace dew::data::jinja {

std::vector<std::string> code_points(std::string_view text) {
  std::vector<std::string> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > text.size()) n = 1;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) n = 1;
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

List iterate(const Value& value) {
  switch (value.kind()) {
    case Kind::Undefined: return {};
    case Kind::List: return value.list();
    case Kind::Dict: {
      if (value.dict().is_namespace || value.dict().is_loop) fail("'", value.type_name(), "' object is not iterable");
      List keys;
      for (const auto& item : value.dict().items) keys.push_back(key_value(item.first));
      return keys;
    }
    case Kind::String: {
      List chars;
      for (std::string& cp : code_points(value.text())) chars.push_back(Value(std::move(cp)));
      return chars;
    }
    default: fail("'", value.type_name(), "' object is not iterable");
  }
}

std::int64_t length_of(const Value& value) {
  switch (value.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: {
      std::int64_t n = 0;
      for (unsigned char c : value.text()) n += (c & 0xC0) != 0x80;
      return n;
    }
    case Kind::List: return static_cast<std::int64_t>(value.list().size());
    case Kind::Dict: return static_cast<std::int64_t>(value.dict().items.size());
    default: fail("object of type '", value.type_name(), "' has no len()");
  }
}

namespace {

std::int64_t int_arg(const Value& v, std::int64_t fallback, const char* what) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (v.kind() != Kind::Int && v.kind() != Kind::Bool) fail(what, " must be an integer, not ", v.type_name());
  return v.as_int();
}

std::string string_arg(const Value& v, const char* what) {
  if (!v.is_string()) fail(what, " must be a string, not ", v.type_name());
  return v.text();
}

// jinja2's environment.getitem for "a.b.0" paths used by attribute= arguments: item first, then attribute.
Value attribute_path(const Value& object, const Value& path) {
  if (path.kind() == Kind::Int) {
    if (object.is_list() && path.as_int() >= 0 && static_cast<std::size_t>(path.as_int()) < object.list().size())
      return object.list()[static_cast<std::size_t>(path.as_int())];
    return Value::undefined("item");
  }
  Value current = object;
  for (const std::string& part : text::split(path.str(), Value("."), -1)) {
    if (current.is_dict()) {
      const Value* v = current.dict().find(part);
      current = v ? *v : Value::undefined(part);
    } else if (current.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      std::size_t i = std::stoul(part);
      current = i < current.list().size() ? current.list()[i] : Value::undefined(part);
    } else {
      return Value::undefined(part);
    }
  }
  return current;
}

// Sort key with jinja2's case_sensitive=False default: strings compare lowercased.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(text::lower(v.text()));
  return v;
}

Value filter_default(Interpreter&, Value& v, Arguments& a) {
  Value fallback = a.get(0, "default_value", Value(""));
  bool boolean = a.get(1, "boolean", Value(false)).truthy();
  a.finish();
  if (v.is_undefined() || (boolean && !v.truthy())) return fallback;
  return v;
}

Value filter_length(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value(length_of(v));
}

Value filter_trim(Interpreter&, Value& v, Arguments& a) {
  Value chars = a.get(0, "chars");
  a.finish();
  return Value(text::strip(v.str(), chars, true, true));
}

Value filter_upper(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value(text::upper(v.str()));
}

Value filter_lower(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value(text::lower(v.str()));
}

Value filter_capitalize(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value(text::capitalize(v.str()));
}

Value filter_title(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value(text::jinja_title(v.str()));
}

Value filter_replace(Interpreter& interp, Value& v, Arguments& a) {
  std::string old = a.get(0, "old").str(), replacement = a.get(1, "new").str();
  std::int64_t count = int_arg(a.get(2, "count"), -1, "replace count");
  a.finish();
  return Value(text::replace(v.str(), old, replacement, count, interp.limits().max_output_bytes));
}

Value filter_join(Interpreter& interp, Value& v, Arguments& a) {
  std::string separator = a.get(0, "d", Value("")).str();
  Value attribute = a.get(1, "attribute");
  a.finish();
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += separator;
    first = false;
    out += (attribute.is_undefined() ? item : attribute_path(item, attribute)).str();
    interp.check_size(out.size());
  }
  return Value(std::move(out));
}

Value filter_first(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  List items = iterate(v);
  return items.empty() ? Value::undefined("first of an empty sequence") : items.front();
}

Value filter_last(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  List items = iterate(v);
  return items.empty() ? Value::undefined("last of an empty sequence") : items.back();
}

Value filter_tojson(Interpreter&, Value& v, Arguments& a) {
  bool ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
  Value indent = a.get(1, "indent");
  Value separators = a.get(2, "separators");
  bool sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
  a.finish();
  if (!separators.is_undefined() && !separators.is_none()) fail("tojson: separators are not supported");
  int width = indent.is_undefined() || indent.is_none() ? -1 : static_cast<int>(std::clamp<std::int64_t>(int_arg(indent, -1, "tojson indent"), 0, 64));
  return Value(to_json_text(v, width, sort_keys, ensure_ascii));
}

Value filter_string(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return v.is_string() ? v : Value(v.str());
}

bool parse_python_int(std::string s, std::int64_t base, std::int64_t& out) {
  s = text::strip(s, Value(), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  try {
    std::size_t used = 0;
    out = std::stoll(s, &used, static_cast<int>(base));
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

bool parse_python_float(std::string s, double& out) {
  s = text::strip(s, Value(), true, true);
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return false;
  try {
    std::size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

Value filter_int(Interpreter&, Value& v, Arguments& a) {
  Value fallback = a.get(0, "default", Value(0));
  std::int64_t base = int_arg(a.get(1, "base"), 10, "int base");
  a.finish();
  if (v.kind() == Kind::Int || v.kind() == Kind::Bool) return Value(v.as_int());
  if (v.kind() == Kind::Float) {
    double f = v.as_double();
    if (!std::isfinite(f) || std::fabs(f) > 9.2e18) return fallback;
    return Value(static_cast<std::int64_t>(f));
  }
  if (v.is_string()) {
    std::int64_t i;
    if (parse_python_int(v.text(), base, i)) return Value(i);
    double f;
    if (parse_python_float(v.text(), f) && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value(static_cast<std::int64_t>(f));
  }
  return fallback;
}

Value filter_float(Interpreter&, Value& v, Arguments& a) {
  Value fallback = a.get(0, "default", Value(0.0));
  a.finish();
  if (v.is_number()) return Value(v.as_double());
  double f;
  if (v.is_string() && parse_python_float(v.text(), f)) return Value(f);
  return fallback;
}

Value filter_list(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value(iterate(v));
}

List dict_items(const Value& v) {
  List out;
  if (v.is_undefined()) return out;
  if (!v.is_dict() || v.dict().is_namespace || v.dict().is_loop) fail("items: can only get item pairs from a mapping, not ", v.type_name());
  for (const auto& [key, value] : v.dict().items) out.push_back(Value::tuple(List{key_value(key), value}));
  return out;
}

Value filter_items(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value(dict_items(v));
}

Value filter_dictsort(Interpreter&, Value& v, Arguments& a) {
  bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
  std::string by = a.get(1, "by", Value("key")).str();
  bool reverse = a.get(2, "reverse", Value(false)).truthy();
  a.finish();
  if (by != "key" && by != "value") fail("dictsort: you can only sort by either 'key' or 'value'");
  List items = dict_items(v);
  std::size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key(x.list()[pos], case_sensitive), ky = sort_key(y.list()[pos], case_sensitive);
    return reverse ? value_less(ky, kx) : value_less(kx, ky);
  });
  return Value(std::move(items));
}

// select/reject/selectattr/rejectattr: keep items whose (attribute's) test result equals `keep`.
Value select_items(Interpreter& interp, Value& v, Arguments& a, bool by_attribute, bool keep) {
  std::size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (a.positional.empty()) fail(a.callee, ": an attribute name is needed");
    attribute = a.positional[next++];
  }
  std::string test_name;
  if (next < a.positional.size()) test_name = string_arg(a.positional[next++], "the test name");
  Arguments test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<long>(next), a.positional.end());
  test_args.keyword = a.keyword;
  List out;
  if (!v.truthy()) return Value(std::move(out));  // jinja2: `if seq:` first, so none selects nothing
  for (const Value& item : iterate(v)) {
    Value subject = by_attribute ? attribute_path(item, attribute) : item;
    bool result;
    if (test_name.empty()) {
      result = subject.truthy();
    } else {
      Arguments copy = test_args;
      result = interp.apply_test(test_name, subject, copy);
    }
    if (result == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value filter_select(Interpreter& i, Value& v, Arguments& a) { return select_items(i, v, a, false, true); }
Value filter_reject(Interpreter& i, Value& v, Arguments& a) { return select_items(i, v, a, false, false); }
Value filter_selectattr(Interpreter& i, Value& v, Arguments& a) { return select_items(i, v, a, true, true); }
Value filter_rejectattr(Interpreter& i, Value& v, Arguments& a) { return select_items(i, v, a, true, false); }

Value filter_map(Interpreter& interp, Value& v, Arguments& a) {
  List out;
  if (!v.truthy()) return Value(std::move(out));  // jinja2: `if value:` first
  Value attribute, fallback;
  bool by_attribute = false;
  for (auto it = a.keyword.begin(); it != a.keyword.end();) {
    if (it->first == "attribute") {
      attribute = it->second;
      by_attribute = true;
      it = a.keyword.erase(it);
    } else if (it->first == "default") {
      fallback = it->second;
      it = a.keyword.erase(it);
    } else {
      ++it;
    }
  }
  if (by_attribute) {
    if (!a.positional.empty() || !a.keyword.empty()) fail("map: unexpected arguments beside attribute=");
    for (const Value& item : iterate(v)) {
      Value x = attribute_path(item, attribute);
      out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
    }
    return Value(std::move(out));
  }
  if (a.positional.empty()) fail("map: a filter name or attribute= is needed");
  std::string name = string_arg(a.positional[0], "map's filter name");
  for (const Value& item : iterate(v)) {
    Arguments args;
    args.positional.assign(a.positional.begin() + 1, a.positional.end());
    args.keyword = a.keyword;
    out.push_back(interp.apply_filter(name, item, args));
  }
  return Value(std::move(out));
}

Value filter_safe(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  return Value::markup(v.str());
}

Value filter_indent(Interpreter& interp, Value& v, Arguments& a) {
  Value width = a.get(0, "width", Value(4));
  bool first = a.get(1, "first", Value(false)).truthy();
  bool blank = a.get(2, "blank", Value(false)).truthy();
  a.finish();
  std::string indention = width.is_string() ? width.text() : std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(int_arg(width, 4, "indent width"), 0, 1 << 16)), ' ');
  std::vector<std::string> lines = text::splitlines(v.str() + "\n");
  std::string out;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indention;
      out += lines[i];
      interp.check_size(out.size());
    }
  } else if (!lines.empty()) {
    out = lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
      interp.check_size(out.size());
    }
  }
  if (first) out = indention + out;
  return Value(std::move(out));
}

double python_round(double x, std::int64_t digits) {
  double scale = std::pow(10.0, static_cast<double>(digits));
  double y = x * scale;
  double r = std::nearbyint(y);  // half to even, as Python's round
  return r / scale;
}

Value filter_round(Interpreter&, Value& v, Arguments& a) {
  std::int64_t precision = int_arg(a.get(0, "precision", Value(0)), 0, "round precision");
  std::string method = a.get(1, "method", Value("common")).str();
  a.finish();
  if (!v.is_number()) fail("round: a number is needed, not ", v.type_name());
  if (method == "common") {
    if (v.kind() != Kind::Float) return Value(v.as_int());
    return Value(python_round(v.as_double(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "floor") return Value(std::floor(v.as_double() * scale) / scale);
  if (method == "ceil") return Value(std::ceil(v.as_double() * scale) / scale);
  fail("round: method must be common, ceil or floor");
}

Value filter_abs(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  if (v.kind() == Kind::Float) return Value(std::fabs(v.as_double()));
  if (v.kind() == Kind::Int || v.kind() == Kind::Bool) {
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  fail("bad operand type for abs(): '", v.type_name(), "'");
}

Value filter_unique(Interpreter&, Value& v, Arguments& a) {
  bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
  Value attribute = a.get(1, "attribute");
  a.finish();
  List out, seen;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(attribute.is_undefined() ? item : attribute_path(item, attribute), case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value(std::move(out));
}

Value filter_sort(Interpreter&, Value& v, Arguments& a) {
  bool reverse = a.get(0, "reverse", Value(false)).truthy();
  bool case_sensitive = a.get(1, "case_sensitive", Value(false)).truthy();
  Value attribute = a.get(2, "attribute");
  a.finish();
  List items = iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key(attribute.is_undefined() ? x : attribute_path(x, attribute), case_sensitive);
    Value ky = sort_key(attribute.is_undefined() ? y : attribute_path(y, attribute), case_sensitive);
    return reverse ? value_less(ky, kx) : value_less(kx, ky);
  });
  return Value(std::move(items));
}

Value filter_reverse(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  if (v.is_string()) {
    std::vector<std::string> cps = code_points(v.text());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value(std::move(out));
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value min_max(Value& v, Arguments& a, bool want_max) {
  bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
  Value attribute = a.get(1, "attribute");
  a.finish();
  List items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Value* best = &items[0];
  for (const Value& item : items) {
    Value k = sort_key(attribute.is_undefined() ? item : attribute_path(item, attribute), case_sensitive);
    Value b = sort_key(attribute.is_undefined() ? *best : attribute_path(*best, attribute), case_sensitive);
    if (want_max ? value_less(b, k) : value_less(k, b)) best = &item;
  }
  return *best;
}

Value filter_min(Interpreter&, Value& v, Arguments& a) { return min_max(v, a, false); }
Value filter_max(Interpreter&, Value& v, Arguments& a) { return min_max(v, a, true); }

Value filter_sum(Interpreter&, Value& v, Arguments& a) {
  Value attribute = a.get(0, "attribute");
  Value total = a.get(1, "start", Value(0));
  a.finish();
  for (const Value& item : iterate(v)) {
    Value x = attribute.is_undefined() ? item : attribute_path(item, attribute);
    if (!x.is_number() || !total.is_number()) fail("sum: unsupported operand types '", total.type_name(), "' and '", x.type_name(), "'");
    if (x.kind() == Kind::Float || total.kind() == Kind::Float) {
      total = Value(total.as_double() + x.as_double());
    } else {
      std::int64_t r;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) fail("sum: integer overflow");
      total = Value(r);
    }
  }
  return total;
}

Value filter_escape(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  std::string out;
  for (char c : v.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value filter_format(Interpreter&, Value& v, Arguments& a) {
  if (!a.keyword.empty()) fail("format: keyword arguments are not supported");
  return Value(text::percent_format(v.str(), a.positional));
}

Value filter_attr(Interpreter&, Value& v, Arguments& a) {
  std::string name = a.get(0, "name").str();
  a.finish();
  if (v.is_dict()) {
    if (const Value* x = v.dict().find(name); x && v.dict().is_namespace) return *x;
  }
  return Value::undefined(name);
}

Value filter_center(Interpreter& interp, Value& v, Arguments& a) {
  std::int64_t width = int_arg(a.get(0, "width", Value(80)), 80, "center width");
  a.finish();
  std::string s = v.str();
  auto n = length_of(Value(s));
  if (width <= n) return Value(s);
  interp.check_size(static_cast<std::size_t>(width));
  std::int64_t pad = width - n, left = pad / 2 + (pad & width & 1);
  return Value(std::string(static_cast<std::size_t>(left), ' ') + s + std::string(static_cast<std::size_t>(pad - left), ' '));
}

Value filter_wordcount(Interpreter&, Value& v, Arguments& a) {
  a.finish();
  std::int64_t n = 0;
  bool in_word = false;
  for (char c : v.str()) {
    bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value(n);
}

const std::unordered_map<std::string_view, FilterFunction>& filters() {
  static const std::unordered_map<std::string_view, FilterFunction> table = {
      {"default", filter_default}, {"d", filter_default}, {"length", filter_length}, {"count", filter_length},
      {"trim", filter_trim}, {"upper", filter_upper}, {"lower", filter_lower}, {"capitalize", filter_capitalize},
      {"title", filter_title}, {"replace", filter_replace}, {"join", filter_join}, {"first", filter_first},
      {"last", filter_last}, {"tojson", filter_tojson}, {"string", filter_string}, {"int", filter_int},
      {"float", filter_float}, {"list", filter_list}, {"items", filter_items}, {"dictsort", filter_dictsort},
      {"select", filter_select}, {"reject", filter_reject}, {"selectattr", filter_selectattr},
      {"rejectattr", filter_rejectattr}, {"map", filter_map}, {"safe", filter_safe}, {"indent", filter_indent},
      {"round", filter_round}, {"abs", filter_abs}, {"unique", filter_unique}, {"sort", filter_sort},
      {"reverse", filter_reverse}, {"min", filter_min}, {"max", filter_max}, {"sum", filter_sum},
      {"escape", filter_escape}, {"e", filter_escape}, {"forceescape", filter_escape}, {"format", filter_format},
      {"attr", filter_attr}, {"center", filter_center}, {"wordcount", filter_wordcount},
  };
  return table;
}

// --- tests ---

bool test_defined(Interpreter&, const Value& v, Arguments& a) { a.finish(); return !v.is_undefined(); }
bool test_undefined(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.is_undefined(); }
bool test_none(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.is_none(); }
bool test_boolean(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.kind() == Kind::Bool; }
bool test_true(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.kind() == Kind::Bool && v.as_bool(); }
bool test_false(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.kind() == Kind::Bool && !v.as_bool(); }
bool test_integer(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.kind() == Kind::Int; }
bool test_float(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.kind() == Kind::Float; }
bool test_number(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.is_number(); }
bool test_string(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.is_string(); }
bool test_mapping(Interpreter&, const Value& v, Arguments& a) {
  a.finish();
  return v.is_dict() && !v.dict().is_namespace && !v.dict().is_loop;
}
bool test_iterable(Interpreter&, const Value& v, Arguments& a) {
  a.finish();
  return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.dict().is_namespace && !v.dict().is_loop);
}
bool test_callable(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.is_function(); }
bool test_escaped(Interpreter&, const Value&, Arguments& a) { a.finish(); return false; }

std::int64_t number_for_parity(const Value& v) {
  if (v.kind() != Kind::Int && v.kind() != Kind::Bool) {
    if (v.kind() == Kind::Float) return static_cast<std::int64_t>(std::fmod(v.as_double(), 2.0));
    fail("even/odd: a number is needed, not ", v.type_name());
  }
  return v.as_int();
}
bool test_even(Interpreter&, const Value& v, Arguments& a) { a.finish(); return number_for_parity(v) % 2 == 0; }
bool test_odd(Interpreter&, const Value& v, Arguments& a) { a.finish(); return number_for_parity(v) % 2 != 0; }
bool test_divisibleby(Interpreter&, const Value& v, Arguments& a) {
  Value n = a.get(0, "num");
  a.finish();
  if (!v.is_number() || !n.is_number()) fail("divisibleby: numbers are needed");
  if (n.as_double() == 0) fail("divisibleby: integer division or modulo by zero");
  if (v.kind() == Kind::Float || n.kind() == Kind::Float) return std::fmod(v.as_double(), n.as_double()) == 0;
  if (n.as_int() == -1) return true;
  return v.as_int() % n.as_int() == 0;
}

Value other(Arguments& a) {
  Value o = a.get(0, "other");
  a.finish();
  return o;
}
bool test_eq(Interpreter&, const Value& v, Arguments& a) { return values_equal(v, other(a)); }
bool test_ne(Interpreter&, const Value& v, Arguments& a) { return !values_equal(v, other(a)); }
bool test_lt(Interpreter&, const Value& v, Arguments& a) { return value_less(v, other(a)); }
bool test_gt(Interpreter&, const Value& v, Arguments& a) { return value_less(other(a), v); }
bool test_le(Interpreter&, const Value& v, Arguments& a) { return !value_less(other(a), v); }
bool test_ge(Interpreter&, const Value& v, Arguments& a) { return !value_less(v, other(a)); }
bool test_sameas(Interpreter&, const Value& v, Arguments& a) {
  Value o = other(a);
  if (v.identity() || o.identity()) return v.identity() == o.identity();
  return v.kind() == o.kind() && (v.is_none() || v.is_undefined() || (v.kind() == Kind::Bool && v.as_bool() == o.as_bool()));
}
bool test_in(Interpreter&, const Value& v, Arguments& a) {
  Value seq = a.get(0, "seq");
  a.finish();
  if (seq.is_string()) return v.is_string() && seq.text().find(v.text()) != std::string::npos;
  if (seq.is_dict()) return seq.dict().find(dict_key(v)) != nullptr;
  if (seq.is_undefined()) return false;
  for (const Value& item : iterate(seq))
    if (values_equal(item, v)) return true;
  return false;
}
bool test_lower(Interpreter&, const Value& v, Arguments& a) {
  a.finish();
  std::string s = v.str();
  return text::lower(s) == s && text::upper(s) != s;
}
bool test_upper(Interpreter&, const Value& v, Arguments& a) {
  a.finish();
  std::string s = v.str();
  return text::upper(s) == s && text::lower(s) != s;
}
bool test_filter(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.is_string() && find_filter(v.text()); }
bool test_test(Interpreter&, const Value& v, Arguments& a) { a.finish(); return v.is_string() && find_test(v.text()); }

const std::unordered_map<std::string_view, TestFunction>& tests() {
  static const std::unordered_map<std::string_view, TestFunction> table = {
      {"defined", test_defined}, {"undefined", test_undefined}, {"none", test_none}, {"boolean", test_boolean},
      {"true", test_true}, {"false", test_false}, {"integer", test_integer}, {"float", test_float},
      {"number", test_number}, {"string", test_string}, {"mapping", test_mapping}, {"iterable", test_iterable},
      {"sequence", test_iterable}, {"callable", test_callable}, {"escaped", test_escaped}, {"even", test_even},
      {"odd", test_odd}, {"divisibleby", test_divisibleby}, {"eq", test_eq}, {"equalto", test_eq}, {"==", test_eq},
      {"ne", test_ne}, {"!=", test_ne}, {"lt", test_lt}, {"lessthan", test_lt}, {"<", test_lt}, {"gt", test_gt},
      {"greaterthan", test_gt}, {">", test_gt}, {"le", test_le}, {"<=", test_le}, {"ge", test_ge}, {">=", test_ge},
      {"sameas", test_sameas}, {"in", test_in}, {"lower", test_lower}, {"upper", test_upper},
      {"filter", test_filter}, {"test", test_test},
  };
  return table;
}

}  // namespace

FilterFunction find_filter(std::string_view name) {
  auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

TestFunction find_test(std::string_view name) {
  auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace dew::data::jinja
