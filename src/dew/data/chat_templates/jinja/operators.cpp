#include "dew/data/chat_templates/jinja/operators.h"

#include <cmath>

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/interpreter.h"
#include "dew/data/chat_templates/jinja/text.h"

namespace dew::data::jinja {
namespace {

[[noreturn]] void overflow() { fail("integer overflow (dew's templates use 64-bit integers)"); }

double py_floor_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

// One branch per operator with Python's rules for its operand types: a table, read one operator at a time.
Value arithmetic(const std::string& op, Value a, Value b, Interpreter& interp) {
  if (a.is_undefined() || b.is_undefined())
    fail("'", (a.is_undefined() ? a : b).text(), "' is undefined");
  if (op == "+") {
    if (a.is_string() && b.is_string() && (a.is_markup() || b.is_markup())) {
      // Markup + str escapes the str (and str + Markup too): what `"..."|safe + x` renders.
      Arguments none;
      Value plain = a.is_markup() ? b : a;
      std::string escaped = b.is_markup() && a.is_markup() ? plain.text() : interp.apply_filter("escape", plain, none).text();
      interp.check_size(a.text().size() + b.text().size() + escaped.size());
      return Value::markup(a.is_markup() ? a.text() + escaped : escaped + b.text());
    }
    if (a.is_string() && b.is_string()) {
      interp.check_size(a.text().size() + b.text().size());
      return Value(a.text() + b.text());
    }
    if (a.is_list() && b.is_list()) {
      interp.check_size(a.list().size() + b.list().size());
      List list = a.list();
      list.insert(list.end(), b.list().begin(), b.list().end());
      return Value(std::move(list));
    }
  }
  if (op == "%" && a.is_string()) {  // printf-style: 'v%d' % 3, '%s-%s' % (a, b)
    std::string out = text::percent_format(a.text(), b.is_tuple() ? b.list() : List{b});
    interp.check_size(out.size());
    return Value(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.kind() == Kind::Int) std::swap(a, b);
  if (op == "*" && a.kind() == Kind::Int && (b.is_string() || b.is_list())) {
    std::int64_t n = std::max<std::int64_t>(0, a.as_int());
    std::size_t unit = b.is_string() ? b.text().size() : b.list().size();
    if (unit && static_cast<std::size_t>(n) > interp.limits().max_output_bytes / unit)
      fail("the repeated value would exceed the output limit");
    if (b.is_string()) {
      std::string out;
      for (std::int64_t i = 0; i < n; ++i) out += b.text();
      return Value(std::move(out));
    }
    List out;
    for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), b.list().begin(), b.list().end());
    return Value(std::move(out));
  }
  if (!a.is_number() || !b.is_number())
    fail("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
  bool integral = a.kind() != Kind::Float && b.kind() != Kind::Float;
  if (op == "/") {
    if (b.as_double() == 0) fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (integral) {
    std::int64_t x = a.as_int(), y = b.as_int(), r;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) overflow();
      return Value(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) overflow();
      return Value(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) overflow();
      return Value(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      std::int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      std::int64_t result = 1;
      for (std::int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) overflow();
        if (result == 0 || result == 1) break;
      }
      if (x == -1) result = (y % 2) ? -1 : 1;
      return Value(result);
    }
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "//" || op == "%") {
    if (y == 0) fail("float division or modulo by zero");
    return op == "//" ? Value(std::floor(x / y)) : Value(py_floor_mod(x, y));
  }
  if (op == "**") return Value(std::pow(x, y));
  fail("unknown operator ", op);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) fail("'in <string>' requires string as left operand, not ", item.type_name());
    return container.text().find(item.text()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list())
      if (values_equal(v, item)) return true;
    return false;
  }
  if (container.is_dict()) return container.dict().find(dict_key(item)) != nullptr;
  if (container.is_undefined()) return false;  // jinja2's Undefined iterates as empty
  fail("argument of type '", container.type_name(), "' is not iterable");
}


}  // namespace dew::data::jinja
