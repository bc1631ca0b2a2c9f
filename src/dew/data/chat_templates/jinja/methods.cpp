// The Python methods of str, dict and list that templates call (message.content.strip(),
// tool.get('function'), ...), returned as callables bound to their object.
#include <algorithm>
#include <cctype>

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/builtins.h"
#include "dew/data/chat_templates/jinja/interpreter.h"
#include "dew/data/chat_templates/jinja/text.h"

namespace dew::data::jinja {
namespace {

List strings(const std::vector<std::string>& parts) {
  List out;
  out.reserve(parts.size());
  for (const std::string& p : parts) out.push_back(Value(p));
  return out;
}

std::int64_t optional_int(const Value& v, std::int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (v.kind() != Kind::Int && v.kind() != Kind::Bool) fail("an integer is required, not ", v.type_name());
  return v.as_int();
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) fail(prefix ? "startswith" : "endswith", " first arg must be str or a tuple of str, not ", a.type_name());
    const std::string& t = a.text();
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (affix.is_list()) return std::any_of(affix.list().begin(), affix.list().end(), one);
  return one(affix);
}

bool all_chars(const std::string& s, int (*pred)(int)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)) != 0; });
}

// One branch per Python str method templates use: a table, read one method at a time.
Value string_method(const std::string& s, const std::string& name, Interpreter& interp, Arguments& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Value chars = a.get(0, "chars");
    a.finish();
    return Value(text::strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Value sep = a.get(0, "sep");
    std::int64_t maxsplit = optional_int(a.get(1, "maxsplit"), -1);
    a.finish();
    return Value(strings(name == "split" ? text::split(s, sep, maxsplit) : text::rsplit(s, sep, maxsplit)));
  }
  if (name == "splitlines") {
    a.finish();
    return Value(strings(text::splitlines(s)));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    a.finish();
    if (name == "upper") return Value(text::upper(s));
    if (name == "lower") return Value(text::lower(s));
    if (name == "title") return Value(text::py_title(s));
    return Value(text::capitalize(s));
  }
  if (name == "replace") {
    std::string old = a.get(0, "old").str(), replacement = a.get(1, "new").str();
    std::int64_t count = optional_int(a.get(2, "count"), -1);
    a.finish();
    return Value(text::replace(s, old, replacement, count, interp.limits().max_output_bytes));
  }
  if (name == "startswith" || name == "endswith") {
    Value affix = a.get(0, name == "startswith" ? "prefix" : "suffix");
    a.finish();
    return Value(affix_match(s, affix, name == "startswith"));
  }
  if (name == "format") {
    std::string out = text::format(s, a);
    interp.check_size(out.size());
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Value sub = a.get(0, "sub");
    a.finish();
    if (!sub.is_string()) fail(name, "() argument must be str, not ", sub.type_name());
    if (name == "count") {
      if (sub.text().empty()) return Value(length_of(Value(s)) + 1);
      std::int64_t n = 0;
      for (std::size_t i = s.find(sub.text()); i != std::string::npos; i = s.find(sub.text(), i + sub.text().size())) ++n;
      return Value(n);
    }
    std::size_t at = name[0] == 'r' ? s.rfind(sub.text()) : s.find(sub.text());
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value(-1);
    }
    return Value(length_of(Value(s.substr(0, at))));
  }
  if (name == "join") {
    Value items = a.get(0, "iterable");
    a.finish();
    std::string out;
    bool first = true;
    for (const Value& item : iterate(items)) {
      if (!item.is_string()) fail("sequence item: expected str instance, ", item.type_name(), " found");
      if (!first) out += s;
      first = false;
      out += item.text();
      interp.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    std::string affix = a.get(0, "affix").str();
    a.finish();
    if (affix_match(s, Value(affix), name == "removeprefix"))
      return Value(name == "removeprefix" ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
    return Value(s);
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    a.finish();
    if (name == "isdigit") return Value(all_chars(s, ::isdigit));
    if (name == "isalpha") return Value(all_chars(s, ::isalpha));
    if (name == "isalnum") return Value(all_chars(s, ::isalnum));
    if (name == "isspace") return Value(all_chars(s, ::isspace));
    bool any_cased = std::any_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
    if (name == "isupper") return Value(any_cased && text::upper(s) == s);
    return Value(any_cased && text::lower(s) == s);
  }
  fail("'str' object has no attribute '", name, "'");
}

Value dict_method(const Value& object, const std::string& name, Arguments& a) {
  const Dict& dict = object.dict();
  if (name == "get") {
    Value key = a.get(0, "key");
    Value fallback = a.get(1, "default", Value::none());
    a.finish();
    if (const Value* v = dict.find(dict_key(key))) return *v;
    return fallback;
  }
  a.finish();
  List out;
  for (const auto& [key, value] : dict.items) {
    if (name == "keys") {
      out.push_back(key_value(key));
    } else if (name == "values") {
      out.push_back(value);
    } else if (name == "items") {
      out.push_back(Value::tuple(List{key_value(key), value}));
    }
  }
  if (name == "copy") {
    auto copy = std::make_shared<Dict>(dict);
    return Value(copy);
  }
  return Value(std::move(out));
}

Value list_method(const Value& object, const std::string& name, Arguments& a) {
  Value item = a.get(0, "value");
  a.finish();
  const List& list = object.list();
  if (name == "count") return Value(static_cast<std::int64_t>(std::count_if(list.begin(), list.end(), [&](const Value& v) { return values_equal(v, item); })));
  for (std::size_t i = 0; i < list.size(); ++i)
    if (values_equal(list[i], item)) return Value(static_cast<std::int64_t>(i));
  fail(item.repr(), " is not in list");
}

bool one_of(const std::string& name, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

}  // namespace

Value find_method(const Value& object, const std::string& name) {
  if (object.is_string()) {
    if (!one_of(name, {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "upper", "lower", "title",
                       "capitalize", "replace", "startswith", "endswith", "format", "find", "rfind", "index",
                       "rindex", "count", "join", "removeprefix", "removesuffix", "isdigit", "isalpha", "isalnum",
                       "isspace", "isupper", "islower"}))
      return Value();
    std::string s = object.text();
    return Value::function([s, name](Interpreter& interp, Arguments& a) {
      a.callee = "str." + name;
      return string_method(s, name, interp, a);
    }, "str." + name);
  }
  if (object.is_dict() && !object.dict().is_namespace && !object.dict().is_loop) {
    if (one_of(name, {"clear", "pop", "popitem", "setdefault", "update"}))
      fail("access to attribute '", name, "' of 'dict' object is unsafe (the sandbox forbids changing values)");
    if (!one_of(name, {"get", "keys", "values", "items", "copy"})) return Value();
    return Value::function([object, name](Interpreter&, Arguments& a) {
      a.callee = "dict." + name;
      return dict_method(object, name, a);
    }, "dict." + name);
  }
  if (object.is_list()) {
    if (one_of(name, {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"}))
      fail("access to attribute '", name, "' of 'list' object is unsafe (the sandbox forbids changing values)");
    if (!one_of(name, {"index", "count"})) return Value();
    return Value::function([object, name](Interpreter&, Arguments& a) {
      a.callee = "list." + name;
      return list_method(object, name, a);
    }, "list." + name);
  }
  return Value();
}

}  // namespace dew::data::jinja
