#pragma once
// Renders a parsed Template (ast.h) against a context of variables, the way jinja2's
// ImmutableSandboxedEnvironment does for transformers: Python semantics for values and operators,
// for-loop scoping (a set inside a loop does not leak out; namespace() is the way out), macros,
// loop controls. Errors throw dew::Error "<template>:<line>: <message>".
//
// Limits keep hostile templates finite: output size, loop iterations and macro call depth.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dew/data/chat_templates/jinja/ast.h"
#include "dew/data/chat_templates/jinja/value.h"

namespace dew::data::jinja {

struct RenderLimits {
  std::size_t max_output_bytes = std::size_t{64} << 20;  // also bounds any string built on the way
  std::size_t max_loop_iterations = 10'000'000;           // all loops together
  int max_call_depth = 64;                                // macros calling macros
};

class Interpreter {
 public:
  Interpreter(const Template& tmpl, RenderLimits limits = {});
  // `variables` are the template's context (messages, add_generation_prompt, ...); the globals
  // (range, namespace, dict, raise_exception, strftime_now) are added underneath.
  std::string render(const std::shared_ptr<Dict>& variables);

  // For filters and methods that call back (map, select, macros as arguments).
  Value call(const Value& callee, Arguments& args);
  Value apply_filter(const std::string& name, Value input, Arguments& args);
  bool apply_test(const std::string& name, const Value& input, Arguments& args);
  // Throws if a string of `size` bytes would exceed the output limit.
  void check_size(std::size_t size) const;
  const RenderLimits& limits() const { return limits_; }
  // namespace() objects made while rendering; emptied at the end so that cycles through them
  // ({% set ns.self = ns %}) are freed.
  void track_namespace(const std::shared_ptr<Dict>& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { Normal, Break, Continue };
  struct MacroDef;

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Node& node, std::string& out);
  void exec_for(const Node& node, std::string& out);
  void assign(const std::vector<std::string>& targets, const Value& value, int line);
  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_call(const Expr& e, const Value* caller = nullptr);
  Arguments eval_arguments(const Expr& e, std::size_t first_child);
  Value lookup(const std::string& name) const;
  Value get_attribute(const Value& object, const std::string& name, int line);
  Value get_item(const Value& object, const Value& key);
  Value call_macro(const MacroDef& macro, Arguments& args);
  void append(std::string& out, std::string_view text) const;
  [[noreturn]] void fail_at(int line, const std::string& message) const;

  const Template& template_;
  RenderLimits limits_;
  std::vector<std::shared_ptr<Dict>> scopes_;
  std::vector<std::weak_ptr<Dict>> namespaces_;  // innermost last; [0] globals, [1] context+top level
  std::size_t iterations_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
};

}  // namespace dew::data::jinja
