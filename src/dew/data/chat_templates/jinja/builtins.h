#pragma once
// jinja2's filters and tests, the Python str/dict/list methods templates call, and the helpers they
// share (UTF-8 code points, Python's str methods).
#include <string>
#include <string_view>
#include <vector>

#include "dew/data/chat_templates/jinja/value.h"

namespace dew::data::jinja {

using FilterFunction = Value (*)(Interpreter&, Value&, Arguments&);
using TestFunction = bool (*)(Interpreter&, const Value&, Arguments&);

// nullptr when jinja2 has no filter/test of that name.
FilterFunction find_filter(std::string_view name);
TestFunction find_test(std::string_view name);

// obj.name for a method of str, dict or list as a bound callable; Undefined when there is none.
// (Methods that modify, like list.append, are refused as the sandbox refuses them.)
Value find_method(const Value& object, const std::string& name);

// Iteration as Python does it: list items, dict keys, string code points; Undefined is empty.
List iterate(const Value& value);
// A string's code points, each as its UTF-8 bytes (an invalid byte stands for itself).
std::vector<std::string> code_points(std::string_view text);
// len(): code points of a string, items of a list or dict.
std::int64_t length_of(const Value& value);

}  // namespace dew::data::jinja
