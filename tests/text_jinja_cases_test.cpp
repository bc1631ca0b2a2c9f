// The Jinja interpreter feature by feature: small templates whose expected output (or failure) was
// rendered by transformers' jinja2 environment (tests/fixtures/chat_templates/jinja_cases.json, made by
// tools/reference/make_chat_template_fixtures.py), plus the limits that keep hostile templates finite.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/interpreter.h"
#include "dew/data/chat_templates/jinja/parser.h"
#include "test_support.h"

namespace dew::data::jinja {
namespace {
using Json = nlohmann::ordered_json;

std::string render(const std::string& source, const Json& context = Json::object(), RenderLimits limits = {}) {
  auto tmpl = parse_template(source, "case");
  Value variables = from_json(context.is_null() ? Json::object() : context);
  return Interpreter(*tmpl, limits).render(variables.dict_ptr());
}

std::string error_of(const std::string& source, const Json& context = Json::object(), RenderLimits limits = {}) {
  try {
    render(source, context, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaCases, MatchJinja2) {
  Json fixture = Json::parse(read_file(test::fixtures() / "chat_templates" / "jinja_cases.json"));
  for (const Json& c : fixture["cases"]) {
    std::string name = c["name"].get<std::string>();
    std::string source = c["template"].get<std::string>();
    if (c.contains("error")) {
      EXPECT_NE(error_of(source, c["context"]), "(no error)") << name << ": jinja2 fails with " << c["error"];
      continue;
    }
    try {
      EXPECT_EQ(render(source, c["context"]), c["expected"].get<std::string>()) << name << "\n" << source;
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what() << "\n" << source;
    }
  }
}

TEST(JinjaErrors, NameTheTemplateLineAndProblem) {
  EXPECT_NE(error_of("a\n{{ nothing.attr }}").find("case:2: 'nothing' is undefined"), std::string::npos)
      << error_of("a\n{{ nothing.attr }}");
  EXPECT_NE(error_of("{{ raise_exception('Only user and assistant') }}").find("Only user and assistant"), std::string::npos);
  EXPECT_NE(error_of("\n\n{% frobnicate %}").find("case:3: syntax error: encountered unknown tag 'frobnicate'"), std::string::npos)
      << error_of("\n\n{% frobnicate %}");
  EXPECT_NE(error_of("{% if x %}open").find("syntax error"), std::string::npos);
  EXPECT_NE(error_of("{{ [].append(1) }}").find("unsafe"), std::string::npos);
}

TEST(JinjaLimits, StopRunawayTemplates) {
  RenderLimits small;
  small.max_output_bytes = 1000;
  small.max_loop_iterations = 100;
  EXPECT_NE(error_of("{% for i in range(60) %}{% for j in range(60) %}{% endfor %}{% endfor %}", {}, small).find("iterations"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(50) %}{{ 'y' * 100 }}{% endfor %}", {}, small).find("bytes"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", {}, small)
                .find("bytes"),
            std::string::npos);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}").find("nests deeper"), std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 64 }}").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(x=[]) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}{% endfor %}")
                .find("nest deeper than 256"),
            std::string::npos);
  // A namespace holding itself is freed at the end of rendering (the fuzz build's leak checker would say).
  EXPECT_EQ(render("{% set ns = namespace(n=1) %}{% set ns.self = ns %}{{ ns.self.self.n }}"), "1");
}

}  // namespace
}  // namespace dew::data::jinja
