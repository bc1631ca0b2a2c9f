#pragma once
// Tokens -> Template (ast.h), following jinja2's grammar and operator precedence. Unknown tags, unclosed
// blocks and malformed expressions throw dew::Error "<name>:<line>: syntax error: ...".
#include <memory>
#include <string>
#include <string_view>

#include "dew/data/chat_templates/jinja/ast.h"

namespace dew::data::jinja {

std::shared_ptr<const Template> parse_template(std::string_view source, const std::string& name);

}  // namespace dew::data::jinja
