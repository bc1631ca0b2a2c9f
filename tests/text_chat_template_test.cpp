// Real checkpoints' chat templates rendered byte for byte as transformers renders them (fixtures made by
// tools/reference/make_chat_template_fixtures.py with transformers' render_jinja_template).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/chat_templates/chat_template.h"
#include "test_support.h"

namespace dew::data {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Json load(const std::string& name) { return Json::parse(read_file(test::fixtures() / "chat_templates" / (name + ".json"))); }

class ChatTemplateFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixture, RendersEveryCaseLikeTransformers) {
  Json fixture = load(GetParam());
  ChatTemplate chat_template(fixture["template"].get<std::string>(), GetParam());
  int rendered = 0;
  for (const Json& c : fixture["cases"]) {
    std::string label = GetParam() + "/" + c["conversation"].get<std::string>() +
                        (c["add_generation_prompt"].get<bool>() ? "+gen" : "") + " extra=" + c["extra"].dump();
    if (c.contains("error")) {
      try {
        chat_template.render(c["messages"], c["add_generation_prompt"].get<bool>(), c["extra"]);
        ADD_FAILURE() << label << ": expected the error '" << c["error"].get<std::string>() << "'";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << label << ": " << e.what();
      }
      continue;
    }
    std::string out;
    try {
      out = chat_template.render(c["messages"], c["add_generation_prompt"].get<bool>(), c["extra"]);
    } catch (const Error& e) {
      ADD_FAILURE() << label << ": " << e.what();
      continue;
    }
    EXPECT_EQ(out, c["expected"].get<std::string>()) << label;
    ++rendered;
  }
  EXPECT_GT(rendered, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, ChatTemplateFixture,
                         ::testing::Values("smollm2", "qwen2_5", "qwen3", "llama3_1", "llama3_2", "mistral_nemo",
                                           "gemma2", "smollm3", "phi3_5", "deepseek_r1_qwen"));

TEST(ChatTemplate, SyntaxErrorNamesTemplateAndLine) {
  try {
    ChatTemplate("line one\n{% if x %}\n{{ x + }}", "bad.jinja");
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("bad.jinja:3: syntax error"), std::string::npos) << message;
  }
}

TEST(ChatTemplate, RaiseExceptionNamesTemplateLineAndMessage) {
  ChatTemplate t("{% for m in messages %}\n{% if m.role == 'system' %}\n{{ raise_exception('System role not supported') }}\n{% endif %}{% endfor %}",
                 "gemma");
  try {
    t.render(Json::parse(R"([{"role": "system", "content": "x"}])"), false);
    FAIL() << "expected raise_exception to throw";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("gemma:3:"), std::string::npos) << message;
    EXPECT_NE(message.find("System role not supported"), std::string::npos) << message;
  }
}

TEST(ChatTemplate, ToolsAndDocumentsAreNoneUnlessGiven) {
  ChatTemplate t("{{ tools is none }} {{ documents is none }} {{ tools is defined }} {{ bos_token }}", "t");
  EXPECT_EQ(t.render(Json::array(), false), "True True True ");
  EXPECT_EQ(t.render(Json::array(), false, Json{{"tools", Json::array()}, {"bos_token", "<s>"}}), "False True True <s>");
}

TEST(ChatTemplate, ReasoningFieldsAreAliasedAsTransformersDoes) {
  ChatTemplate t("{% for m in messages %}{{ m | tojson }}{% endfor %}", "t");
  EXPECT_EQ(t.render(Json::parse(R"([{"role": "assistant", "content": "a", "reasoning": "r"}])"), false),
            R"({"thinking": "r", "role": "assistant", "content": "a", "reasoning": "r", "reasoning_content": "r"})");
}

// How fast it renders a chat of 10 messages is bench/input_paths_bench's chat_template case.

}  // namespace
}  // namespace dew::data
