#pragma once
// The dynamic values a Jinja template computes with, modelled on the Python objects jinja2 sees: none,
// bool, int, float, str, list (tuples too), dict (insertion-ordered, string keys), callables (macros,
// globals, bound methods) and jinja2's default Undefined (renders as "", is falsy, iterates as empty;
// anything else done with it is an error naming the variable).
//
// Lists and dicts are shared, as Python references are: namespace() attribute assignment must be seen by
// every holder of the namespace.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dew::data::jinja {

class Value;
using List = std::vector<Value>;
struct Dict;
struct Arguments;
class Interpreter;
using Function = std::function<Value(Interpreter&, Arguments&)>;

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string name) {
    Value v;
    v.text_ = std::move(name);
    return v;
  }
  static Value none() { return Value(Kind::None); }
  Value(bool b) : kind_(Kind::Bool), int_(b) {}
  Value(int i) : kind_(Kind::Int), int_(i) {}
  Value(std::int64_t i) : kind_(Kind::Int), int_(i) {}
  Value(double f) : kind_(Kind::Float), float_(f) {}
  Value(std::string s) : kind_(Kind::String), text_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::String), text_(s) {}
  // Lists and dicts record how deeply they nest, so that printing, comparing and freeing them cannot
  // exhaust the stack: deeper than kMaxNesting is an error.
  static constexpr std::uint32_t kMaxNesting = 256;
  Value(List list) : kind_(Kind::List), list_(std::make_shared<List>(std::move(list))) { measure_nesting(); }
  // A Python tuple: a list that prints with parentheses (dict items, tuple literals).
  static Value tuple(List list) {
    Value v(std::move(list));
    v.tuple_ = true;
    return v;
  }
  // jinja2's Markup (the `safe` filter's result): `+` with a plain string HTML-escapes the plain one.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.tuple_ = true;
    return v;
  }
  Value(std::shared_ptr<Dict> dict) : kind_(Kind::Dict), dict_(std::move(dict)) { measure_nesting(); }
  // `name` is what error messages and repr call it ("<macro foo>").
  static Value function(Function f, std::string name) {
    Value v(Kind::Function);
    v.function_ = std::make_shared<Function>(std::move(f));
    v.text_ = std::move(name);
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_function() const { return kind_ == Kind::Function; }
  bool is_tuple() const { return kind_ == Kind::List && tuple_; }
  bool is_markup() const { return kind_ == Kind::String && tuple_; }

  bool as_bool() const { return int_ != 0; }
  std::int64_t as_int() const { return int_; }  // Int and Bool
  double as_double() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& text() const { return text_; }  // String; Undefined: its name; Function: its name
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const std::shared_ptr<Dict>& dict_ptr() const { return dict_; }
  const Function& function() const { return *function_; }
  const void* identity() const;  // for `is sameas`: the shared object, or null for plain values

  bool truthy() const;
  // Python's str(): what {{ }} prints. Undefined prints as "".
  std::string str() const;
  // Python's repr(), used inside str() of lists and dicts.
  std::string repr() const;
  std::string type_name() const;  // "str", "int", "list", "dict", ... for messages

 private:
  explicit Value(Kind kind) : kind_(kind) {}
  void measure_nesting();
  Kind kind_ = Kind::Undefined;
  std::int64_t int_ = 0;
  double float_ = 0;
  bool tuple_ = false;  // List: a tuple; String: Markup
  std::uint32_t nesting_ = 0;  // List/Dict: 1 + the deepest element's
  std::string text_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> function_;
};

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace(): attributes only, no dict methods
  bool is_loop = false;       // the `loop` variable of a for

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

inline Value make_dict() { return Value(std::make_shared<Dict>()); }

// Dict keys are strings; a key of another type (a dict literal's {1024: 512}) is stored under an encoded
// string ("\0" + type + text) and decoded back wherever keys come out, so it stays an int to the template.
// Numbers equal in Python (1, 1.0, True) share a key.
std::string dict_key(const Value& key);
Value key_value(const std::string& key);
// The text of a key as json.dumps writes it (1024 -> "1024", None -> "null").
std::string key_json_text(const std::string& key);

// Positional and keyword arguments of a call.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  std::string callee;  // for messages

  // The argument at `index` or named `name`, else `fallback`; consumed arguments are not reported by
  // finish().
  Value get(std::size_t index, const std::string& name, Value fallback = Value());
  // Throws if an argument was given that no get() asked for.
  void finish() const;

 private:
  std::size_t used_positional_ = 0;
  std::vector<std::string> used_names_;
};

// Python's float repr (shortest round-trip digits, scientific outside 1e-4 <= |x| < 1e16).
std::string python_float(double value);
// Python's repr of a str: quotes chosen like Python, control characters escaped.
std::string python_repr(std::string_view text);

bool values_equal(const Value& a, const Value& b);
// Python's <, for numbers, strings and lists; other pairs are an error.
bool value_less(const Value& a, const Value& b);

Value from_json(const nlohmann::ordered_json& json);
// json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys): transformers' tojson.
// indent < 0: none (separators ", " and ": ").
// ensure_ascii: non-ASCII characters as \uXXXX escapes (surrogate pairs above U+FFFF).
std::string to_json_text(const Value& value, int indent, bool sort_keys = false, bool ensure_ascii = false);

}  // namespace dew::data::jinja
