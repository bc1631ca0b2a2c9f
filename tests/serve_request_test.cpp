// dew serve's request parsing: the OpenAI fields read into CompletionRequest, and every wrong type or
// out-of-range value refused with a 400 that names the field and the value.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dew/serve/api_error.h"
#include "dew/serve/openai_request.h"

using dew::serve::ApiError;
using dew::serve::CompletionRequest;
using nlohmann::json;

namespace {

// The ApiError a parse throws (status 0 when none).
ApiError chat_error(const json& body) {
  try {
    dew::serve::parse_chat_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "(no error)");
}

ApiError completion_error(const json& body) {
  try {
    dew::serve::parse_completion_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "(no error)");
}

json chat(json extra = json::object()) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

}  // namespace

TEST(ServeRequest, ChatFieldsAreRead) {
  auto request = dew::serve::parse_chat_request(chat({{"temperature", 0.5},
                                                      {"top_p", 0.9},
                                                      {"max_completion_tokens", 7},
                                                      {"max_tokens", 99},
                                                      {"stop", "END"},
                                                      {"n", 3},
                                                      {"seed", -1},
                                                      {"logprobs", true},
                                                      {"top_logprobs", 4},
                                                      {"presence_penalty", 0.5},
                                                      {"frequency_penalty", -0.5},
                                                      {"stream", true},
                                                      {"stream_options", {{"include_usage", true}}},
                                                      {"ignore_eos", true},
                                                      {"some_future_field", {1, 2, 3}}}));
  EXPECT_EQ(request.endpoint, dew::serve::Endpoint::chat_completions);
  EXPECT_EQ(request.model, "m");
  EXPECT_DOUBLE_EQ(request.temperature, 0.5);
  EXPECT_DOUBLE_EQ(request.top_p, 0.9);
  EXPECT_EQ(request.max_tokens, 7);  // max_completion_tokens wins over max_tokens
  EXPECT_EQ(request.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(request.n, 3);
  EXPECT_EQ(request.seed, ~std::uint64_t{0});  // -1's bits
  EXPECT_TRUE(request.logprobs);
  EXPECT_EQ(request.top_logprobs, 4);
  EXPECT_DOUBLE_EQ(request.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(request.frequency_penalty, -0.5);
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  EXPECT_TRUE(request.ignore_eos);
  ASSERT_EQ(request.messages.size(), 1u);
  EXPECT_EQ(request.messages[0]["content"], "hi");
}

TEST(ServeRequest, ChatDefaultsFollowOpenAI) {
  auto request = dew::serve::parse_chat_request(chat({{"temperature", nullptr}, {"stop", nullptr}}));
  EXPECT_DOUBLE_EQ(request.temperature, 1.0);
  EXPECT_DOUBLE_EQ(request.top_p, 1.0);
  EXPECT_FALSE(request.max_tokens);
  EXPECT_TRUE(request.stop.empty());
  EXPECT_EQ(request.n, 1);
  EXPECT_FALSE(request.seed);
  EXPECT_FALSE(request.stream);
}

TEST(ServeRequest, MessagesAreNormalised) {
  auto request = dew::serve::parse_chat_request(
      json{{"messages",
            {{{"role", "developer"}, {"content", "be brief"}},
             {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
             {{"role", "assistant"}, {"content", nullptr}}}}});
  EXPECT_EQ(request.messages[0]["role"], "system");  // developer is OpenAI's newer name for system
  EXPECT_EQ(request.messages[1]["content"], "a\nb");
  EXPECT_EQ(request.messages[2]["content"], "");
  EXPECT_EQ(request.model, "");
}

TEST(ServeRequest, TopPZeroMeansGreedy) {
  auto request = dew::serve::parse_chat_request(chat({{"top_p", 0}}));
  EXPECT_DOUBLE_EQ(request.temperature, 0.0);
  EXPECT_DOUBLE_EQ(request.top_p, 1.0);
}

TEST(ServeRequest, WrongValuesNameTheFieldAndValue) {
  struct Case {
    json extra;
    std::string param, in_message;
  };
  std::vector<Case> cases = {
      {{{"temperature", 2.5}}, "temperature", "2.5"},
      {{{"temperature", "hot"}}, "temperature", "\"hot\""},
      {{{"top_p", 1.5}}, "top_p", "1.5"},
      {{{"n", 0}}, "n", "'n' is 0"},
      {{{"n", 17}}, "n", "17"},
      {{{"n", 1.5}}, "n", "an integer"},
      {{{"max_tokens", 0}}, "max_tokens", "'max_tokens' is 0"},
      {{{"max_completion_tokens", -3}}, "max_completion_tokens", "-3"},
      {{{"top_logprobs", 21}, {"logprobs", true}}, "top_logprobs", "21"},
      {{{"top_logprobs", 2}}, "top_logprobs", "logprobs"},
      {{{"presence_penalty", 3}}, "presence_penalty", "3"},
      {{{"frequency_penalty", -2.5}}, "frequency_penalty", "-2.5"},
      {{{"stop", 5}}, "stop", "5"},
      {{{"stop", {"a", ""}}}, "stop", "stop[1]"},
      {{{"stop", {"a", 1}}}, "stop", "stop[1]"},
      {{{"stream", "yes"}}, "stream", "\"yes\""},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options", "stream"},
      {{{"seed", "x"}}, "seed", "\"x\""},
      {{{"logprobs", 1}}, "logprobs", "true or false"},
      {{{"model", 3}}, "model", "3"},
      {{{"tools", {{{"type", "function"}}}}}, "tools", "not supported"},
      {{{"response_format", {{"type", "json_object"}}}}, "response_format", "json_object"},
      {{{"logit_bias", {{"50256", -100}}}}, "logit_bias", "not supported"},
  };
  for (const auto& c : cases) {
    auto error = chat_error(chat(c.extra));
    EXPECT_EQ(error.status(), 400) << c.extra.dump();
    EXPECT_EQ(error.param(), c.param) << c.extra.dump() << ": " << error.what();
    EXPECT_NE(std::string(error.what()).find(c.in_message), std::string::npos) << c.extra.dump() << ": " << error.what();
  }
}

TEST(ServeRequest, BadMessagesNameTheMessage) {
  EXPECT_EQ(chat_error(json{{"model", "m"}}).param(), "messages");
  EXPECT_EQ(chat_error(json{{"messages", json::array()}}).param(), "messages");
  EXPECT_EQ(chat_error(json{{"messages", "hi"}}).param(), "messages");
  EXPECT_EQ(chat_error(json{{"messages", {{{"content", "hi"}}}}}).param(), "messages[0].role");
  auto role = chat_error(json{{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "robot"}, {"content", "b"}}}}});
  EXPECT_EQ(role.param(), "messages[1].role");
  EXPECT_NE(std::string(role.what()).find("\"robot\""), std::string::npos) << role.what();
  EXPECT_EQ(chat_error(json{{"messages", {{{"role", "user"}, {"content", 5}}}}}).param(), "messages[0].content");
  auto image = chat_error(json{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}});
  EXPECT_EQ(image.param(), "messages[0].content[0]");
  EXPECT_NE(std::string(image.what()).find("image_url"), std::string::npos);
}

TEST(ServeRequest, CompletionPromptsAndLegacyLogprobs) {
  auto one = dew::serve::parse_completion_request(json{{"prompt", "Once"}, {"max_tokens", 5}, {"echo", true}, {"logprobs", nullptr}});
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(one.prompts[0].text, "Once");
  EXPECT_TRUE(one.echo);
  EXPECT_FALSE(one.logprobs);

  auto many = dew::serve::parse_completion_request(json{{"prompt", {"a", "b"}}, {"logprobs", 3}});
  ASSERT_EQ(many.prompts.size(), 2u);
  EXPECT_TRUE(many.logprobs);
  EXPECT_EQ(many.top_logprobs, 3);

  auto ids = dew::serve::parse_completion_request(json{{"prompt", {1, 2, 3}}});
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_ids);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<std::int32_t>{1, 2, 3}));

  auto nested = dew::serve::parse_completion_request(json{{"prompt", {{1, 2}, {3}}}});
  ASSERT_EQ(nested.prompts.size(), 2u);
  EXPECT_EQ(nested.prompts[1].ids, std::vector<std::int32_t>{3});
}

TEST(ServeRequest, BadCompletionsNameTheField) {
  EXPECT_EQ(completion_error(json{{"max_tokens", 3}}).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", 3}}).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", json::array()}}).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", {"a", 3}}}).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", {{1, -2}}}}).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", "a"}, {"logprobs", 21}}).param(), "logprobs");
  EXPECT_EQ(completion_error(json{{"prompt", "a"}, {"suffix", "z"}}).param(), "suffix");
  EXPECT_EQ(completion_error(json{{"prompt", "a"}, {"best_of", 3}}).param(), "best_of");
}

TEST(ServeRequest, InvalidJsonAndNonObjectsAre400) {
  for (const char* text : {"{\"messages\": [", "", "nope", "[1, 2]", "\"text\""}) {
    try {
      dew::serve::parse_json_body(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << text;
      EXPECT_EQ(e.type(), "invalid_request_error");
    }
  }
  EXPECT_EQ(dew::serve::parse_json_body("{\"a\": 1}")["a"], 1);
}

TEST(ServeRequest, ErrorBodyHasOpenAIShape) {
  ApiError error(400, "'n' is 0; use an integer from 1 to 16", "n", "invalid_value");
  auto body = dew::serve::error_body(error);
  EXPECT_EQ(body["error"]["message"], "'n' is 0; use an integer from 1 to 16");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "n");
  EXPECT_EQ(body["error"]["code"], "invalid_value");
  auto bare = dew::serve::error_body(ApiError(429, "full", "", "", "rate_limit_error"));
  EXPECT_TRUE(bare["error"]["param"].is_null());
  EXPECT_TRUE(bare["error"]["code"].is_null());
  // A message quoting a client's invalid UTF-8 still dumps.
  EXPECT_NO_THROW(dew::serve::error_text(ApiError(400, "bad \xff value")));
}
