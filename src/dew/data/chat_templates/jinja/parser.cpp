#include "dew/data/chat_templates/jinja/parser.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/lexer.h"

namespace dew::data::jinja {
namespace {

constexpr int kMaxNesting = 200;  // deeper expressions or blocks are refused (a fuzzer's stack guard)

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : tokens_(std::move(tokens)), name_(name) {}

  Body parse_all() {
    Body body = parse_body({});
    if (peek().type != TokenType::End) error("unexpected tag");
    return body;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.error("the template nests deeper than 200 levels");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  const Token& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool at_op(std::string_view op, std::size_t ahead = 0) const {
    return peek(ahead).type == TokenType::Operator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, std::size_t ahead = 0) const {
    return peek(ahead).type == TokenType::Name && peek(ahead).text == name;
  }
  bool accept_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) error(str("expected '", op, "', got ", describe(peek())));
  }
  std::string expect_name() {
    if (peek().type != TokenType::Name) error(str("expected a name, got ", describe(peek())));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != TokenType::BlockEnd) error(str("expected end of statement block, got ", describe(peek())));
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::End: return "end of template";
      case TokenType::BlockEnd: return "'%}'";
      case TokenType::VariableEnd: return "'}}'";
      case TokenType::String: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void error(const std::string& message) const {
    fail(name_, ":", peek().line, ": syntax error: ", message);
  }

  // Statements until a block tag whose keyword is in `stops` (left unconsumed, after its '{%').
  Body parse_body(const std::vector<std::string_view>& stops) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == TokenType::End) {
        if (!stops.empty()) error(str("unexpected end of template, expected '", stops.front(), "'"));
        return body;
      }
      if (t.type == TokenType::Text) {
        auto node = make(NodeType::Text);
        node->text = next().text;
        body.push_back(std::move(node));
      } else if (t.type == TokenType::VariableBegin) {
        next();
        auto node = make(NodeType::Output);
        node->expr = parse_expression();
        if (peek().type != TokenType::VariableEnd) error(str("expected '}}', got ", describe(peek())));
        next();
        body.push_back(std::move(node));
      } else if (t.type == TokenType::BlockBegin) {
        const Token& keyword = peek(1);
        if (keyword.type == TokenType::Name &&
            std::find(stops.begin(), stops.end(), keyword.text) != stops.end()) {
          next();
          return body;
        }
        next();
        parse_statement(body);
      } else {
        error(str("unexpected ", describe(t)));
      }
    }
  }

  NodePtr make(NodeType type) {
    auto node = std::make_unique<Node>();
    node->type = type;
    node->line = peek().line;
    return node;
  }

  void parse_statement(Body& body) {
    if (peek().type != TokenType::Name) error(str("expected a statement name, got ", describe(peek())));
    std::string keyword = next().text;
    if (keyword == "if") {
      body.push_back(parse_if());
    } else if (keyword == "for") {
      body.push_back(parse_for());
    } else if (keyword == "set") {
      body.push_back(parse_set());
    } else if (keyword == "macro") {
      body.push_back(parse_macro());
    } else if (keyword == "call") {
      body.push_back(parse_call_block());
    } else if (keyword == "filter") {
      auto node = make(NodeType::FilterBlock);
      node->expr = parse_filter_chain(block_body_input());
      expect_block_end();
      node->body = parse_body({"endfilter"});
      next();
      expect_block_end();
      body.push_back(std::move(node));
    } else if (keyword == "generation") {
      // transformers' extension: marks the assistant's text; rendering is the body's.
      expect_block_end();
      Body inner = parse_body({"endgeneration"});
      next();
      expect_block_end();
      for (auto& node : inner) body.push_back(std::move(node));
    } else if (keyword == "break" || keyword == "continue") {
      if (loop_depth_ == 0) error(str("'", keyword, "' outside of a for loop"));
      body.push_back(make(keyword == "break" ? NodeType::Break : NodeType::Continue));
      expect_block_end();
    } else {
      error(str("encountered unknown tag '", keyword, "'"));
    }
  }

  NodePtr parse_if() {
    auto node = make(NodeType::If);
    while (true) {
      node->conditions.push_back(parse_tuple_expression());
      expect_block_end();
      node->bodies.push_back(parse_body({"elif", "else", "endif"}));
      std::string keyword = next().text;
      if (keyword == "elif") continue;
      if (keyword == "else") {
        expect_block_end();
        node->else_body = parse_body({"endif"});
        next();
      }
      expect_block_end();
      return node;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    bool paren = accept_op("(");
    do {
      targets.push_back(expect_name());
    } while (accept_op(","));
    if (paren) expect_op(")");
    return targets;
  }

  NodePtr parse_for() {
    auto node = make(NodeType::For);
    node->targets = parse_targets();
    if (!accept_name("in")) error(str("expected 'in', got ", describe(peek())));
    node->expr = parse_tuple_expression(/*with_condexpr=*/false);
    if (accept_name("if")) node->condition = parse_expression();
    if (accept_name("recursive")) error("recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    node->body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (next().text == "else") {
      expect_block_end();
      node->else_body = parse_body({"endfor"});
      next();
    }
    expect_block_end();
    return node;
  }

  NodePtr parse_set() {
    auto node = make(NodeType::Set);
    node->targets.push_back(expect_name());
    if (accept_op(".")) {
      node->attribute = expect_name();
    } else {
      while (accept_op(",")) node->targets.push_back(expect_name());
    }
    if (accept_op("=")) {
      node->expr = parse_tuple_expression();
      expect_block_end();
      return node;
    }
    if (!node->attribute.empty() || node->targets.size() != 1) error("expected '='");
    node->type = NodeType::SetBlock;
    if (accept_op("|")) node->expr = parse_filter_chain(block_body_input());
    expect_block_end();
    node->body = parse_body({"endset"});
    next();
    expect_block_end();
    return node;
  }

  std::vector<std::pair<std::string, ExprPtr>> parse_params() {
    std::vector<std::pair<std::string, ExprPtr>> params;
    expect_op("(");
    while (!accept_op(")")) {
      if (!params.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string param = expect_name();
      ExprPtr fallback;
      if (accept_op("=")) fallback = parse_expression();
      params.emplace_back(param, std::move(fallback));
    }
    return params;
  }

  NodePtr parse_macro() {
    auto node = make(NodeType::Macro);
    node->name = expect_name();
    node->params = parse_params();
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_body({"endmacro"});
    loop_depth_ = saved;
    next();
    expect_block_end();
    return node;
  }

  NodePtr parse_call_block() {
    auto node = make(NodeType::CallBlock);
    if (at_op("(")) node->caller_params = parse_params();
    node->expr = parse_expression();
    if (node->expr->type != ExprType::Call) error("expected a call after 'call'");
    expect_block_end();
    node->body = parse_body({"endcall"});
    next();
    expect_block_end();
    return node;
  }

  // The input of a filter block's or set block's filters: the rendered body, supplied at run time.
  ExprPtr block_body_input() { return expr(ExprType::Name); }

  ExprPtr expr(ExprType type) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->line = peek().line;
    return e;
  }

  // --- expressions, from loosest to tightest binding ---

  // An expression, or an unparenthesised tuple "a, b" (a list).
  ExprPtr parse_tuple_expression(bool with_condexpr = true) {
    ExprPtr first = with_condexpr ? parse_expression() : parse_or();
    if (!at_op(",")) return first;
    auto list = expr(ExprType::ListLit);
    list->negated = true;  // a tuple
    list->children.push_back(std::move(first));
    while (accept_op(",")) {
      if (peek().type == TokenType::BlockEnd || peek().type == TokenType::VariableEnd) break;
      list->children.push_back(with_condexpr ? parse_expression() : parse_or());
    }
    return list;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    ExprPtr value = parse_or();
    while (accept_name("if")) {
      auto cond = expr(ExprType::Conditional);
      cond->children.push_back(parse_or());
      cond->children.push_back(std::move(value));
      cond->children.push_back(accept_name("else") ? parse_expression() : nullptr);
      value = std::move(cond);
    }
    return value;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right) {
    auto e = expr(ExprType::Binary);
    e->name = std::move(op);
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (accept_name("or")) left = binary("or", std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (accept_name("and")) left = binary("and", std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (accept_name("not")) {
      DepthGuard guard(*this);
      auto e = expr(ExprType::Unary);
      e->name = "not";
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (peek().type == TokenType::Operator &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = expr(ExprType::Compare);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_op("+") || at_op("-")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (accept_op("~")) left = binary("~", std::move(left), parse_math2());
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary();
    while (accept_op("**")) left = binary("**", std::move(left), parse_unary());
    return left;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    DepthGuard guard(*this);
    ExprPtr value;
    if (at_op("-") || at_op("+")) {
      auto e = expr(ExprType::Unary);
      e->name = next().text;
      e->children.push_back(parse_unary(false));
      value = std::move(e);
    } else {
      value = parse_postfix(parse_primary());
    }
    if (with_filter) value = parse_filter_expr(std::move(value));
    return value;
  }

  // One branch per kind of primary expression (names, literals, lists, dicts, tuples, parentheses): the
  // grammar's own list, kept in one place.
  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = peek();
    if (t.type == TokenType::Name) {
      auto e = expr(ExprType::Literal);
      std::string name = next().text;
      if (name == "true" || name == "True") {
        e->value = Value(true);
      } else if (name == "false" || name == "False") {
        e->value = Value(false);
      } else if (name == "none" || name == "None") {
        e->value = Value::none();
      } else {
        e->type = ExprType::Name;
        e->name = name;
      }
      return e;
    }
    if (t.type == TokenType::String) {
      auto e = expr(ExprType::Literal);
      std::string text;
      while (peek().type == TokenType::String) text += next().text;
      e->value = Value(std::move(text));
      return e;
    }
    if (t.type == TokenType::Integer || t.type == TokenType::Float) {
      auto e = expr(ExprType::Literal);
      std::string text = next().text;
      try {
        if (t.type == TokenType::Integer) {
          e->value = Value(static_cast<std::int64_t>(std::stoll(text)));
        } else {
          e->value = Value(std::stod(text));
        }
      } catch (const std::exception&) {
        error(str("number ", text, " is out of range"));
      }
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) {
        auto empty = expr(ExprType::ListLit);
        empty->negated = true;  // ()
        return empty;
      }
      ExprPtr inner = parse_expression();
      if (at_op(",")) {
        auto list = expr(ExprType::ListLit);
        list->negated = true;  // a tuple
        list->children.push_back(std::move(inner));
        while (accept_op(",")) {
          if (at_op(")")) break;
          list->children.push_back(parse_expression());
        }
        inner = std::move(list);
      }
      expect_op(")");
      return inner;
    }
    if (accept_op("[")) {
      auto list = expr(ExprType::ListLit);
      while (!accept_op("]")) {
        if (!list->children.empty()) expect_op(",");
        if (accept_op("]")) break;
        list->children.push_back(parse_expression());
      }
      return list;
    }
    if (accept_op("{")) {
      auto dict = expr(ExprType::DictLit);
      while (!accept_op("}")) {
        if (!dict->children.empty()) expect_op(",");
        if (accept_op("}")) break;
        dict->children.push_back(parse_expression());
        expect_op(":");
        dict->children.push_back(parse_expression());
      }
      return dict;
    }
    error(str("unexpected ", describe(t)));
  }

  ExprPtr parse_postfix(ExprPtr value) {
    while (true) {
      if (at_op(".")) {
        next();
        auto e = expr(ExprType::Attribute);
        if (peek().type == TokenType::Integer) {
          e->type = ExprType::Item;
          auto index = expr(ExprType::Literal);
          std::string digits = next().text;
          try {
            index->value = Value(static_cast<std::int64_t>(std::stoll(digits)));
          } catch (const std::exception&) {
            error(str("index ", digits, " is out of range"));
          }
          e->children.push_back(std::move(value));
          e->children.push_back(std::move(index));
        } else {
          e->name = expect_name();
          e->children.push_back(std::move(value));
        }
        value = std::move(e);
      } else if (at_op("[")) {
        next();
        value = parse_subscript(std::move(value));
      } else if (at_op("(")) {
        value = parse_call(std::move(value));
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr value) {
    DepthGuard guard(*this);
    ExprPtr parts[3];
    bool slice = false;
    int part = 0;
    while (!accept_op("]")) {
      if (accept_op(":")) {
        slice = true;
        if (++part > 2) error("too many ':' in a subscript");
        continue;
      }
      if (parts[part]) error(str("unexpected ", describe(peek()), " in a subscript"));
      parts[part] = parse_expression();
    }
    auto e = expr(slice ? ExprType::Slice : ExprType::Item);
    e->children.push_back(std::move(value));
    if (!slice && !parts[0]) error("an empty subscript");
    e->children.push_back(std::move(parts[0]));
    if (slice) {
      e->children.push_back(std::move(parts[1]));
      e->children.push_back(std::move(parts[2]));
    }
    return e;
  }

  // "(" args ")" into e (children after its first, kwargs).
  void parse_arguments(Expr& e) {
    DepthGuard guard(*this);
    expect_op("(");
    bool first = true;
    while (!accept_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (accept_op(")")) break;
      if (peek().type == TokenType::Name && at_op("=", 1)) {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(key, parse_expression());
      } else {
        if (!e.kwargs.empty()) error("a positional argument follows keyword arguments");
        e.children.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = expr(ExprType::Call);
    e->children.push_back(std::move(callee));
    parse_arguments(*e);
    return e;
  }

  ExprPtr parse_filter_chain(ExprPtr value) {
    do {
      auto e = expr(ExprType::Filter);
      e->name = expect_name();
      while (accept_op(".")) e->name += "." + expect_name();
      e->children.push_back(std::move(value));
      if (at_op("(")) parse_arguments(*e);
      value = std::move(e);
    } while (accept_op("|"));
    return value;
  }

  ExprPtr parse_filter_expr(ExprPtr value) {
    while (true) {
      if (accept_op("|")) {
        value = parse_filter_chain(std::move(value));
      } else if (accept_name("is")) {
        auto e = expr(ExprType::Test);
        e->negated = accept_name("not");
        e->name = expect_name();
        e->children.push_back(std::move(value));
        const Token& t = peek();
        if (at_op("(")) {
          parse_arguments(*e);
        } else if ((t.type == TokenType::Name || t.type == TokenType::String || t.type == TokenType::Integer ||
                    t.type == TokenType::Float || at_op("[") || at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and")) {
          if (at_name("is")) error("You cannot chain multiple tests with is");
          e->children.push_back(parse_postfix(parse_primary()));
        }
        value = std::move(e);
      } else if (at_op("(")) {
        value = parse_call(std::move(value));
      } else {
        return value;
      }
    }
  }

  std::vector<Token> tokens_;
  const std::string& name_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::shared_ptr<const Template> parse_template(std::string_view source, const std::string& name) {
  auto result = std::make_shared<Template>();
  result->name = name;
  try {
    Parser parser(tokenize(source, name), name);
    result->body = parser.parse_all();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(name, ": syntax error: cannot parse: ", e.what());
  }
  return result;
}

}  // namespace dew::data::jinja
