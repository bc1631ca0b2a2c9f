#pragma once
// The parsed template: expressions and statements, each with the line it starts on (for errors).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dew/data/chat_templates/jinja/value.h"

namespace dew::data::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprType {
  Literal,   // value
  Name,      // name
  ListLit,   // children: items (negated: a tuple)
  DictLit,   // children: key, value, key, value, ...
  Attribute, // children[0].name
  Item,      // children[0][children[1]]
  Slice,     // children[0][children[1]:children[2]:children[3]] (null children: omitted)
  Call,      // children[0](children[1..], kwargs)
  Filter,    // children[0] | name(children[1..], kwargs)
  Test,      // children[0] is [not] name(children[1..], kwargs)
  Unary,     // name ("-", "+", "not") children[0]
  Binary,    // children[0] name children[1]; name is an operator, "and", "or", "in", "not in", "~"
  Compare,   // children[0] ops[0] children[1] ops[1] children[2] ... (chained like Python)
  Conditional,  // children[1] if children[0] else children[2] (null: undefined)
};

struct Expr {
  ExprType type;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class NodeType {
  Text,        // text
  Output,      // {{ expr }}
  If,          // conditions[i] -> bodies[i]; else_body
  For,         // for targets in expr [if condition]: body; else_body
  Set,         // targets = expr, or target.attribute = expr (attribute non-empty)
  SetBlock,    // {% set targets[0] %}body{% endset %}, through filters (a Filter chain over a Name "")
  Macro,       // name(params with defaults) body
  CallBlock,   // {% call expr %}body{% endcall %}: expr called with caller() rendering body
  FilterBlock, // {% filter f %}body{% endfilter %}
  Break,
  Continue,
};

struct Node {
  NodeType type;
  int line = 0;
  std::string text;
  ExprPtr expr;       // Output, For (iterable), Set, CallBlock, FilterBlock/SetBlock (filter chain)
  ExprPtr condition;  // For's inline if
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body, else_body;
  std::vector<std::string> targets;
  std::string attribute;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro: name, default (null: none)
  std::vector<std::pair<std::string, ExprPtr>> caller_params;  // CallBlock
};

struct Template {
  std::string name;
  Body body;
};

}  // namespace dew::data::jinja
