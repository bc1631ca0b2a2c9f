#include "dew/data/chat_templates/jinja/interpreter.h"

#include <cmath>
#include <ctime>

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/builtins.h"
#include "dew/data/chat_templates/jinja/operators.h"
#include "dew/data/chat_templates/jinja/text.h"

namespace dew::data::jinja {
namespace {

// An error already prefixed with the template and line, passed through unchanged.
struct LocatedError : Error {
  using Error::Error;
};

}  // namespace

struct Interpreter::MacroDef {
  const Node* node;
  Interpreter* owner;
};

Interpreter::Interpreter(const Template& tmpl, RenderLimits limits) : template_(tmpl), limits_(limits) {}

void Interpreter::check_size(std::size_t size) const {
  if (size > limits_.max_output_bytes)
    fail("the template's output would exceed ", limits_.max_output_bytes, " bytes");
}

void Interpreter::append(std::string& out, std::string_view text) const {
  check_size(out.size() + text.size());
  out += text;
}

void Interpreter::fail_at(int line, const std::string& message) const {
  throw LocatedError(str(template_.name, ":", line, ": ", message));
}

// Most of its length is the table of global functions templates may call (range, raise_exception, ...),
// one short entry each.
std::string Interpreter::render(const std::shared_ptr<Dict>& variables) {
  auto globals = std::make_shared<Dict>();
  globals->set("range", Value::function([](Interpreter& interp, Arguments& args) {
    args.callee = "range";
    Value a = args.get(0, "start"), b = args.get(1, "stop"), c = args.get(2, "step", Value(1));
    args.finish();
    std::int64_t start = 0, stop, step = c.as_int();
    if (b.is_undefined()) {
      stop = a.as_int();
    } else {
      start = a.as_int();
      stop = b.as_int();
    }
    for (const Value* v : {&a, &c})
      if (v->kind() != Kind::Int && !v->is_undefined()) fail("range() takes integers, not ", v->type_name());
    if (step == 0) fail("range() arg 3 must not be zero");
    List out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= interp.limits().max_loop_iterations) fail("range() is too long");
      out.push_back(Value(i));
    }
    return Value(std::move(out));
  }, "range"));
  auto make_dict_fn = [](bool as_namespace) {
    return [as_namespace](Interpreter& interp, Arguments& args) {
      auto dict = std::make_shared<Dict>();
      dict->is_namespace = as_namespace;
      if (as_namespace) interp.track_namespace(dict);
      for (const Value& v : args.positional) {
        if (!v.is_dict()) fail(as_namespace ? "namespace" : "dict", "() takes a mapping, not ", v.type_name());
        for (const auto& [key, item] : v.dict().items) dict->set(key, item);
      }
      for (const auto& [key, item] : args.keyword) {
        if (as_namespace && !key.empty() && key[0] == '_')
          fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '", key, "'");
        dict->set(key, item);
      }
      return Value(dict);
    };
  };
  globals->set("namespace", Value::function(make_dict_fn(true), "namespace"));
  globals->set("dict", Value::function(make_dict_fn(false), "dict"));
  globals->set("raise_exception", Value::function([](Interpreter&, Arguments& args) -> Value {
    args.callee = "raise_exception";
    Value message = args.get(0, "message");
    fail("raise_exception: ", message.str());
  }, "raise_exception"));
  globals->set("strftime_now", Value::function([](Interpreter&, Arguments& args) {
    args.callee = "strftime_now";
    Value format = args.get(0, "format");
    args.finish();
    if (!format.is_string()) fail("strftime_now() takes a format string");
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buffer[256];
    std::size_t n = std::strftime(buffer, sizeof buffer, format.text().c_str(), &local);
    return Value(std::string(buffer, n));
  }, "strftime_now"));
  auto context = variables ? std::make_shared<Dict>(*variables) : std::make_shared<Dict>();
  scopes_ = {globals, context};
  iterations_ = 0;
  call_depth_ = 0;
  std::string out;
  struct ClearNamespaces {
    Interpreter& interp;
    ~ClearNamespaces() {
      // Hold every namespace first, so that emptying one frees only its own (bounded) values, never
      // a chain of namespaces at once.
      std::vector<std::shared_ptr<Dict>> held;
      for (auto& weak : interp.namespaces_)
        if (auto ns = weak.lock()) held.push_back(std::move(ns));
      interp.scopes_.clear();
      for (auto& ns : held) ns->items.clear();
      interp.namespaces_.clear();
    }
  } clear{*this};
  try {
    exec_body(template_.body, out);
  } catch (const LocatedError&) {
    throw;
  } catch (const Error& e) {
    fail_at(line_, e.what());
  } catch (const std::bad_alloc&) {
    fail_at(line_, "out of memory while rendering");
  } catch (const std::exception& e) {
    // A standard-library failure (a number out of range, say) is still the template's fault.
    fail_at(line_, std::string("cannot render: ") + e.what());
  }
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, std::string& out) {
  for (const NodePtr& node : body) {
    Flow flow = exec(*node, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

// One case per statement type (the same shape as eval): the length is the number of statement kinds.
Interpreter::Flow Interpreter::exec(const Node& node, std::string& out) {
  line_ = node.line;
  switch (node.type) {
    case NodeType::Text: append(out, node.text); break;
    case NodeType::Output: {
      Value v = eval(*node.expr);
      if (v.is_string()) {
        append(out, v.text());
      } else {
        append(out, v.str());
      }
      break;
    }
    case NodeType::If:
      for (std::size_t i = 0; i < node.conditions.size(); ++i) {
        line_ = node.conditions[i]->line;
        if (eval(*node.conditions[i]).truthy()) return exec_body(node.bodies[i], out);
      }
      return exec_body(node.else_body, out);
    case NodeType::For: exec_for(node, out); break;
    case NodeType::Set: {
      Value v = eval(*node.expr);
      if (!node.attribute.empty()) {
        Value target = lookup(node.targets[0]);
        if (!target.is_dict() || !target.dict().is_namespace)
          fail_at(node.line, "cannot assign attribute on non-namespace object '" + node.targets[0] + "'");
        if (node.attribute[0] == '_')
          fail_at(node.line, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                                 node.attribute + "'");
        target.dict().set(node.attribute, std::move(v));
      } else {
        assign(node.targets, v, node.line);
      }
      break;
    }
    case NodeType::SetBlock: {
      std::string captured;
      exec_body(node.body, captured);
      Value v(std::move(captured));
      if (node.expr) {
        scopes_.push_back(std::make_shared<Dict>());
        scopes_.back()->set("", v);
        try {
          v = eval(*node.expr);
        } catch (...) {
          scopes_.pop_back();
          throw;
        }
        scopes_.pop_back();
      }
      scopes_.back()->set(node.targets[0], std::move(v));
      break;
    }
    case NodeType::FilterBlock: {
      std::string captured;
      exec_body(node.body, captured);
      scopes_.push_back(std::make_shared<Dict>());
      scopes_.back()->set("", Value(std::move(captured)));
      Value v;
      try {
        v = eval(*node.expr);
      } catch (...) {
        scopes_.pop_back();
        throw;
      }
      scopes_.pop_back();
      append(out, v.str());
      break;
    }
    case NodeType::Macro: {
      auto def = std::make_shared<MacroDef>(MacroDef{&node, this});
      scopes_.back()->set(node.name, Value::function([def](Interpreter& interp, Arguments& args) {
        return interp.call_macro(*def, args);
      }, node.name));
      break;
    }
    case NodeType::CallBlock: {
      auto caller_node = &node;
      Value caller = Value::function([caller_node](Interpreter& interp, Arguments& args) {
        MacroDef def{caller_node, &interp};
        return interp.call_macro(def, args);
      }, "caller");
      Value v = eval_call(*node.expr, &caller);
      append(out, v.str());
      break;
    }
    case NodeType::Break: return Flow::Break;
    case NodeType::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

Value Interpreter::call_macro(const MacroDef& macro, Arguments& args) {
  const Node& node = *macro.node;
  const auto& params = node.type == NodeType::CallBlock ? node.caller_params : node.params;
  if (call_depth_ >= limits_.max_call_depth)
    fail("macro calls nest deeper than ", limits_.max_call_depth, " (recursion without end?)");
  auto frame = std::make_shared<Dict>();
  std::vector<bool> given(params.size(), false);
  if (args.positional.size() > params.size())
    fail("macro '", node.name.empty() ? "caller" : node.name, "' takes not more than ", params.size(), " argument(s)");
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    frame->set(params[i].first, args.positional[i]);
    given[i] = true;
  }
  for (auto& [key, value] : args.keyword) {
    bool found = false;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].first == key) {
        if (key == "caller") break;
        frame->set(key, value);
        given[i] = found = true;
      }
    if (key == "caller") {
      frame->set("caller", value);
      found = true;
    }
    if (!found) fail("macro '", node.name, "' takes no keyword argument '", key, "'");
  }
  // Defaults are evaluated in the macro's own frame, so they may refer to earlier parameters.
  std::vector<std::shared_ptr<Dict>> saved = scopes_;
  if (node.type == NodeType::Macro) scopes_ = {saved[0], saved[1]};
  scopes_.push_back(frame);
  ++call_depth_;
  std::string out;
  int saved_line = line_;
  try {
    for (std::size_t i = 0; i < params.size(); ++i)
      if (!given[i]) frame->set(params[i].first, params[i].second ? eval(*params[i].second) : Value::undefined(params[i].first));
    exec_body(node.body, out);
  } catch (...) {
    scopes_ = std::move(saved);
    --call_depth_;
    throw;
  }
  scopes_ = std::move(saved);
  --call_depth_;
  line_ = saved_line;
  return Value(std::move(out));
}

void Interpreter::assign(const std::vector<std::string>& targets, const Value& value, int line) {
  if (targets.size() == 1) {
    scopes_.back()->set(targets[0], value);
    return;
  }
  List items = iterate(value);
  if (items.size() != targets.size())
    fail_at(line, str("cannot unpack ", items.size(), " values into ", targets.size(), " names"));
  for (std::size_t i = 0; i < targets.size(); ++i) scopes_.back()->set(targets[i], items[i]);
}

void Interpreter::exec_for(const Node& node, std::string& out) {
  Value iterable = eval(*node.expr);
  if (iterable.is_none() || iterable.kind() == Kind::Bool || iterable.kind() == Kind::Int || iterable.kind() == Kind::Float)
    fail_at(node.line, str("'", iterable.type_name(), "' object is not iterable"));
  List items = iterate(iterable);
  auto frame = std::make_shared<Dict>();
  scopes_.push_back(frame);
  struct Pop {
    std::vector<std::shared_ptr<Dict>>& scopes;
    ~Pop() { scopes.pop_back(); }
  } pop{scopes_};
  if (node.condition) {
    List kept;
    for (const Value& item : items) {
      frame->items.clear();
      assign(node.targets, item, node.line);
      if (eval(*node.condition).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const std::size_t n = items.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (++iterations_ > limits_.max_loop_iterations)
      fail_at(node.line, str("loops ran more than ", limits_.max_loop_iterations, " iterations in all"));
    frame->items.clear();
    auto loop = std::make_shared<Dict>();
    loop->is_loop = true;
    auto len = static_cast<std::int64_t>(n), index = static_cast<std::int64_t>(i);
    loop->items = {{"index", Value(index + 1)},
                   {"index0", Value(index)},
                   {"revindex", Value(len - index)},
                   {"revindex0", Value(len - index - 1)},
                   {"first", Value(i == 0)},
                   {"last", Value(i + 1 == n)},
                   {"length", Value(len)},
                   {"depth", Value(1)},
                   {"depth0", Value(0)},
                   {"previtem", i > 0 ? items[i - 1] : Value::undefined("previtem")},
                   {"nextitem", i + 1 < n ? items[i + 1] : Value::undefined("nextitem")},
                   {"cycle", Value::function([index](Interpreter&, Arguments& args) {
                      if (args.positional.empty()) fail("no items for cycling given");
                      return args.positional[static_cast<std::size_t>(index) % args.positional.size()];
                    }, "loop.cycle")}};
    frame->set("loop", Value(loop));
    assign(node.targets, items[i], node.line);
    Flow flow = exec_body(node.body, out);
    if (flow == Flow::Break) break;
  }
  if (n == 0) {
    frame->items.clear();
    exec_body(node.else_body, out);
  }
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (const Value* v = (*it)->find(name)) return *v;
  return Value::undefined(name);
}

Value Interpreter::get_attribute(const Value& object, const std::string& name, int line) {
  if (object.is_undefined()) fail("'", object.text(), "' is undefined");
  if (object.is_dict()) {
    const Dict& dict = object.dict();
    if (!dict.is_namespace && !dict.is_loop) {
      Value method = find_method(object, name);
      if (!method.is_undefined()) return method;
    }
    if (const Value* v = dict.find(name)) return *v;
    return Value::undefined(str("'", object.type_name(), " object' has no attribute '", name, "'"));
  }
  Value method = find_method(object, name);
  if (!method.is_undefined()) return method;
  return Value::undefined(str("'", object.type_name(), " object' has no attribute '", name, "'"));
}

Value Interpreter::get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) fail("'", object.text(), "' is undefined");
  if (object.is_dict()) {
    if (const Value* v = object.dict().find(dict_key(key))) return *v;
    if (key.is_string()) {
      if (!object.dict().is_namespace && !object.dict().is_loop) {
        Value method = find_method(object, key.text());
        if (!method.is_undefined()) return method;
      }
    }
    return Value::undefined(str("'", object.type_name(), " object' has no attribute ", key.repr()));
  }
  if ((object.is_list() || object.is_string()) && (key.kind() == Kind::Int || key.kind() == Kind::Bool)) {
    std::int64_t i = key.as_int();
    if (object.is_list()) {
      auto n = static_cast<std::int64_t>(object.list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(str("list object has no element ", key.as_int()));
      return object.list()[static_cast<std::size_t>(i)];
    }
    std::vector<std::string> chars = code_points(object.text());
    auto n = static_cast<std::int64_t>(chars.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(str("str object has no element ", key.as_int()));
    return Value(chars[static_cast<std::size_t>(i)]);
  }
  if (key.is_string()) return get_attribute(object, key.text(), line_);
  return Value::undefined(str("'", object.type_name(), " object' has no element ", key.repr()));
}

Arguments Interpreter::eval_arguments(const Expr& e, std::size_t first_child) {
  Arguments args;
  for (std::size_t i = first_child; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i]));
  for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value));
  return args;
}

Value Interpreter::call(const Value& callee, Arguments& args) {
  if (callee.is_undefined()) fail("'", callee.text(), "' is undefined");
  if (!callee.is_function()) fail("'", callee.type_name(), "' object is not callable");
  if (args.callee.empty()) args.callee = callee.text();
  return callee.function()(*this, args);
}

Value Interpreter::eval_call(const Expr& e, const Value* caller) {
  Value callee = eval(*e.children[0]);
  Arguments args = eval_arguments(e, 1);
  if (caller) args.keyword.emplace_back("caller", *caller);
  line_ = e.line;
  return call(callee, args);
}

Value Interpreter::apply_filter(const std::string& name, Value input, Arguments& args) {
  FilterFunction filter = find_filter(name);
  if (!filter) fail("no filter named '", name, "'");
  args.callee = name;
  return filter(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, Arguments& args) {
  TestFunction test = find_test(name);
  if (!test) fail("no test named '", name, "'");
  args.callee = name;
  return test(*this, input, args);
}

// One case per expression type, each a few lines: longer than a screen because the language has that
// many kinds of expression, and split further it would scatter one dispatch over files.
Value Interpreter::eval(const Expr& e) {
  switch (e.type) {
    case ExprType::Literal: return e.value;
    case ExprType::Name: return lookup(e.name);
    case ExprType::ListLit: {
      List list;
      list.reserve(e.children.size());
      for (const ExprPtr& child : e.children) list.push_back(eval(*child));
      return e.negated ? Value::tuple(std::move(list)) : Value(std::move(list));
    }
    case ExprType::DictLit: {
      auto dict = std::make_shared<Dict>();
      for (std::size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value key = eval(*e.children[i]);
        dict->set(dict_key(key), eval(*e.children[i + 1]));
      }
      return Value(dict);
    }
    case ExprType::Attribute: {
      Value object = eval(*e.children[0]);
      line_ = e.line;
      return get_attribute(object, e.name, e.line);
    }
    case ExprType::Item: {
      Value object = eval(*e.children[0]);
      Value key = eval(*e.children[1]);
      line_ = e.line;
      return get_item(object, key);
    }
    case ExprType::Slice: {
      Value object = eval(*e.children[0]);
      std::optional<std::int64_t> bounds[3];
      for (int i = 0; i < 3; ++i)
        if (e.children[static_cast<std::size_t>(i) + 1]) {
          Value v = eval(*e.children[static_cast<std::size_t>(i) + 1]);
          if (v.is_none()) continue;
          if (v.kind() != Kind::Int && v.kind() != Kind::Bool)
            fail_at(e.line, "slice indices must be integers or None, not " + v.type_name());
          bounds[i] = v.as_int();
        }
      line_ = e.line;
      std::int64_t step = bounds[2].value_or(1);
      if (step == 0) fail_at(e.line, "slice step cannot be zero");
      List source;
      std::vector<std::string> chars;
      if (object.is_string()) {
        chars = code_points(object.text());
      } else if (object.is_list()) {
        source = object.list();
      } else {
        fail_at(e.line, "'" + object.type_name() + "' object is not subscriptable");
      }
      auto n = static_cast<std::int64_t>(object.is_string() ? chars.size() : source.size());
      auto clamp = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
        if (!v) return fallback;
        std::int64_t x = *v < 0 ? *v + n : *v;
        if (step > 0) return std::clamp<std::int64_t>(x, 0, n);
        return std::clamp<std::int64_t>(x, -1, n - 1);
      };
      std::int64_t start = clamp(bounds[0], step > 0 ? 0 : n - 1), stop = clamp(bounds[1], step > 0 ? n : -1);
      std::string text;
      List list;
      for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (object.is_string()) {
          text += chars[static_cast<std::size_t>(i)];
        } else {
          list.push_back(source[static_cast<std::size_t>(i)]);
        }
      }
      return object.is_string() ? Value(std::move(text)) : Value(std::move(list));
    }
    case ExprType::Call: return eval_call(e);
    case ExprType::Filter: {
      Value input = eval(*e.children[0]);
      Arguments args = eval_arguments(e, 1);
      line_ = e.line;
      return apply_filter(e.name, std::move(input), args);
    }
    case ExprType::Test: {
      Value input;
      // `x.y is defined` must not fail when x is defined but lacks y; only an undefined x fails.
      input = eval(*e.children[0]);
      Arguments args = eval_arguments(e, 1);
      line_ = e.line;
      bool result = apply_test(e.name, input, args);
      return Value(e.negated ? !result : result);
    }
    case ExprType::Unary: {
      Value v = eval(*e.children[0]);
      line_ = e.line;
      if (e.name == "not") return Value(!v.truthy());
      if (v.is_undefined()) fail_at(e.line, "'" + v.text() + "' is undefined");
      if (!v.is_number()) fail_at(e.line, "bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.kind() == Kind::Bool ? Value(v.as_int()) : v;
      if (v.kind() == Kind::Float) return Value(-v.as_double());
      if (v.as_int() == INT64_MIN) fail_at(e.line, "integer overflow");
      return Value(-v.as_int());
    }
    case ExprType::Binary: return eval_binary(e);
    case ExprType::Compare: return eval_compare(e);
    case ExprType::Conditional: {
      if (eval(*e.children[0]).truthy()) return eval(*e.children[1]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value::undefined("the else branch of an inline if");
    }
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& e) {
  if (e.name == "and") {
    Value left = eval(*e.children[0]);
    return left.truthy() ? eval(*e.children[1]) : left;
  }
  if (e.name == "or") {
    Value left = eval(*e.children[0]);
    return left.truthy() ? left : eval(*e.children[1]);
  }
  Value left = eval(*e.children[0]);
  Value right = eval(*e.children[1]);
  line_ = e.line;
  if (e.name == "~") {
    std::string a = left.str(), b = right.str();
    check_size(a.size() + b.size());
    return Value(a + b);
  }
  return arithmetic(e.name, left, right, *this);
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (std::size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.children[i + 1]);
    line_ = e.line;
    const std::string& op = e.ops[i];
    bool result;
    if (op == "==") {
      result = values_equal(left, right);
    } else if (op == "!=") {
      result = !values_equal(left, right);
    } else if (op == "<") {
      result = value_less(left, right);
    } else if (op == ">") {
      result = value_less(right, left);
    } else if (op == "<=") {
      result = !value_less(right, left);
    } else if (op == ">=") {
      result = !value_less(left, right);
    } else if (op == "in") {
      result = contains(right, left);
    } else {
      result = !contains(right, left);
    }
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace dew::data::jinja
