// The JSON dew serve answers with, compared with the shapes OpenAI documents: whole responses, streamed
// chunks, usage, chat and legacy log-probabilities, the model list, and the Prometheus metrics text.
#include <gtest/gtest.h>

#include "dew/serve/openai_response.h"
#include "dew/serve/server_metrics.h"

using dew::serve::Endpoint;
using dew::serve::ResponseHeader;

namespace {
dew::serve::TokenLogprob entry(const std::string& token, float logprob, std::size_t offset) {
  return {{token, token, logprob}, {{token, token, logprob}, {"alt", "alt", logprob - 1}}, offset};
}
}  // namespace

TEST(ServeResponse, ChatCompletionShape) {
  ResponseHeader header{Endpoint::chat_completions, "chatcmpl-1", 1700000000, "tiny"};
  std::vector<dew::serve::ChoiceResult> choices = {{"Hello", {entry("Hel", -0.5f, 0), entry("lo", -0.25f, 3)}, "stop"},
                                                   {"Hi", {}, "length"}};
  auto json = dew::serve::whole_response(header, choices, {5, 3}, /*logprobs=*/true);
  EXPECT_EQ(json["object"], "chat.completion");
  EXPECT_EQ(json["id"], "chatcmpl-1");
  EXPECT_EQ(json["model"], "tiny");
  EXPECT_EQ(json["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(json["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(json["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(json["choices"][1]["index"], 1);
  EXPECT_EQ(json["choices"][1]["finish_reason"], "length");
  const auto& content = json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "Hel");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(content[0]["bytes"], (nlohmann::json{72, 101, 108}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "alt");
  EXPECT_EQ(json["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(json["usage"]["completion_tokens"], 3);
  EXPECT_EQ(json["usage"]["total_tokens"], 8);
  EXPECT_EQ(json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  auto plain = dew::serve::whole_response(header, choices, {5, 3}, false);
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

// n choices share one prompt: completion tokens add up, and the cached prompt tokens reported are those every
// choice took from the prefix cache (the fewest), never more than the prompt.
TEST(ServeResponse, UsageAddsChoicesAndReportsTheCachedPromptTokensAllShared) {
  dew::serve::Usage usage{.prompt_tokens = 9};
  usage.add_choice(4, 8);
  usage.add_choice(3, 9);
  usage.add_choice(5, 6);
  EXPECT_EQ(usage.completion_tokens, 12);
  EXPECT_EQ(usage.cached_tokens, 6);
  auto json = dew::serve::usage_json(usage);
  EXPECT_EQ(json["total_tokens"], 21);
  EXPECT_EQ(json["prompt_tokens_details"]["cached_tokens"], 6);
}

TEST(ServeResponse, LegacyCompletionShapeWithEchoOffsets) {
  ResponseHeader header{Endpoint::completions, "cmpl-1", 1, "tiny"};
  std::vector<dew::serve::ChoiceResult> choices = {{"Once upon", {entry(" upon", -1.0f, 0)}, "length", 4}};
  auto json = dew::serve::whole_response(header, choices, {2, 1}, true);
  EXPECT_EQ(json["object"], "text_completion");
  EXPECT_EQ(json["choices"][0]["text"], "Once upon");
  const auto& logprobs = json["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], (nlohmann::json{" upon"}));
  EXPECT_EQ(logprobs["token_logprobs"][0], -1.0);
  EXPECT_EQ(logprobs["top_logprobs"][0]["alt"], -2.0);
  EXPECT_EQ(logprobs["text_offset"], (nlohmann::json{4}));
}

TEST(ServeResponse, StreamChunksAndUsage) {
  ResponseHeader header{Endpoint::chat_completions, "chatcmpl-2", 1, "tiny"};
  dew::serve::ChoiceDelta first{"He", {}, std::nullopt};
  auto chunk = dew::serve::delta_chunk(header, 0, first, /*first=*/true, false, /*usage_null=*/true);
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "He");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk.contains("usage"));
  EXPECT_TRUE(chunk["usage"].is_null());
  dew::serve::ChoiceDelta last{"", {}, std::string("stop")};
  auto closing = dew::serve::delta_chunk(header, 0, last, false, false, false);
  EXPECT_TRUE(closing["choices"][0]["delta"].empty());
  EXPECT_EQ(closing["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(closing.contains("usage"));
  auto usage = dew::serve::usage_chunk(header, {4, 2});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);
  EXPECT_EQ(dew::serve::sse_event(nlohmann::ordered_json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(dew::serve::sse_done(), "data: [DONE]\n\n");

  ResponseHeader text{Endpoint::completions, "cmpl-2", 1, "tiny"};
  auto piece = dew::serve::delta_chunk(text, 1, first, true, false, false);
  EXPECT_EQ(piece["object"], "text_completion");
  EXPECT_EQ(piece["choices"][0]["text"], "He");
  EXPECT_EQ(piece["choices"][0]["index"], 1);
}

TEST(ServeResponse, IdsModelsAndInvalidUtf8) {
  auto id = dew::serve::new_response_id(Endpoint::chat_completions);
  EXPECT_EQ(id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(id.size(), 9u + 24u);
  EXPECT_NE(id, dew::serve::new_response_id(Endpoint::chat_completions));
  EXPECT_EQ(dew::serve::new_response_id(Endpoint::completions).rfind("cmpl-", 0), 0u);
  auto models = dew::serve::models_json("tiny", 5);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_NO_THROW(dew::serve::dump_json(nlohmann::ordered_json{{"text", "\xC3"}}));
}

TEST(ServeMetrics, PrometheusTextHasEveryFamily) {
  dew::serve::ServerMetrics metrics;
  metrics.record_request("/v1/chat/completions", 200);
  metrics.record_request("/v1/chat/completions", 200);
  metrics.record_request("/v1/chat/completions", 429);
  metrics.record_first_token(0.03);
  metrics.record_first_token(7.0);
  auto start = dew::serve::ServerMetrics::Clock::now();
  metrics.record_step(2, 3, 10, 100, true, start);
  metrics.record_step(1, 4, 10, 150, true, start + std::chrono::seconds(1));
  auto text = metrics.prometheus_text();
  for (const char* line : {"dew_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2",
                           "dew_requests_total{endpoint=\"/v1/chat/completions\",status=\"429\"} 1",
                           "dew_prompt_tokens_total 10", "dew_generation_tokens_total 150", "dew_queue_depth 1",
                           "dew_batch_size 4", "dew_time_to_first_token_seconds_bucket{le=\"0.05\"} 1",
                           "dew_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2",
                           "dew_time_to_first_token_seconds_count 2", "# TYPE dew_time_to_first_token_seconds histogram",
                           "dew_generation_tokens_per_second"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_DOUBLE_EQ(metrics.tokens_per_second(start + std::chrono::seconds(1)), 50.0);
  EXPECT_DOUBLE_EQ(metrics.tokens_per_second(start + std::chrono::seconds(30)), 0.0);  // idle since
}
