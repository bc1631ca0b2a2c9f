#pragma once
// Python's binary operators on template values, as jinja2 evaluates them: + - * / // % ** with int
// overflow refused and Python's floor semantics, string/list concatenation and repetition (bounded by the
// output limit), printf-style '%', Markup escaping on +; and the `in` test.
#include <string>

#include "dew/data/chat_templates/jinja/value.h"

namespace dew::data::jinja {

class Interpreter;

// `interp` supplies the output limit and the escape filter.
Value arithmetic(const std::string& op, Value a, Value b, Interpreter& interp);
// `item in container` for strings (substring), lists, dicts (keys) and undefined (empty).
bool contains(const Value& container, const Value& item);

}  // namespace dew::data::jinja
