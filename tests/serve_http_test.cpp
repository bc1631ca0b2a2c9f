// `dew serve` end to end over HTTP, with the tiny llama fixture: the OpenAI routes and their shapes,
// streaming, stop strings, and what bad clients get (invalid JSON, a wrong content type, a body past the
// limit, half a request then silence, no API key, an unknown model, a full queue, a client that leaves
// mid-stream), and a clean exit 0 on SIGTERM with a request in flight.
#include <gtest/gtest.h>

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "dew/serve/utf8_holdback.h"
#include "serve_test_server.h"
#include "wait_until.h"

using nlohmann::json;
using dew::test::RawConnection;
using dew::test::ServeProcess;
using dew::test::wait_until;

namespace {

constexpr const char* kKey = "test-key-123";

struct Reply {
  int status = 0;
  std::string body;
  json data() const { return json::parse(body); }
};

Reply post(int port, const std::string& path, const std::string& body, const std::string& key = kKey,
           const std::string& content_type = "application/json") {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  auto result = client.Post(path.c_str(), headers, body, content_type.c_str());
  if (!result) return {-1, "no response: " + httplib::to_string(result.error())};
  return {result->status, result->body};
}

Reply get(int port, const std::string& path, const std::string& key = kKey) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  auto result = client.Get(path.c_str(), headers);
  if (!result) return {-1, "no response"};
  return {result->status, result->body};
}

// A streamed POST: the `data:` payloads in order. `keep_reading(received so far)` false stops reading and
// drops the connection (a client that goes away).
std::vector<std::string> post_stream(int port, const std::string& path, const json& body,
                                     const std::function<bool(const std::string&)>& keep_reading = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.set_header("Authorization", std::string("Bearer ") + kKey);
  std::string received;
  request.content_receiver = [&](const char* data, std::size_t length, std::uint64_t, std::uint64_t) {
    received.append(data, length);
    return !keep_reading || keep_reading(received);
  };
  httplib::Response response;
  httplib::Error error;
  client.send(request, response, error);
  std::vector<std::string> events;
  for (std::size_t at = 0; (at = received.find("data: ", at)) != std::string::npos;) {
    auto end = received.find("\n\n", at);
    if (end == std::string::npos) break;
    events.push_back(received.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return events;
}

// Whether /metrics counts `n` requests outstanding (accepted, not yet answered).
bool outstanding(int port, int n, const std::string& key = kKey) {
  return get(port, "/metrics", key).body.find("dew_requests_outstanding " + std::to_string(n) + "\n") != std::string::npos;
}

// The tokens generated so far, all requests together (/metrics' dew_generation_tokens_total).
long long generated_tokens(int port) {
  const std::string metrics = get(port, "/metrics").body;
  const std::string name = "\ndew_generation_tokens_total ";
  auto at = metrics.find(name);
  return at == std::string::npos ? -1 : std::stoll(metrics.substr(at + name.size()));
}

std::string error_param(const Reply& reply) {
  auto error = reply.data()["error"];
  return error["param"].is_null() ? "" : error["param"].get<std::string>();
}

json chat_body(json extra = json::object()) {
  json body = {{"model", "llama"}, {"messages", {{{"role", "user"}, {"content", "The capital of France?"}}}}, {"temperature", 0},
               {"max_tokens", 6}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

// One server for the tests that need no special flags: key required, a small body limit, a short read
// timeout.
class ServeHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess("'" + dew::test::tiny_chat_gguf().string() +
                               "' --api-key " + kKey + " --max-batch 4 --max-queue 8 --max-body-bytes 65536 --read-timeout 2");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_GT(server_->port(), 0) << server_->output(); }
  static int port() { return server_->port(); }
  static ServeProcess* server_;
};
ServeProcess* ServeHttp::server_ = nullptr;

}  // namespace

TEST_F(ServeHttp, HealthModelsAndMetrics) {
  auto health = get(port(), "/health", "");  // no key needed
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.data()["status"], "ok");
  auto models = get(port(), "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.data()["data"][0]["id"], "llama");  // the GGUF's file name
  EXPECT_EQ(get(port(), "/v1/models/llama").status, 200);
  auto missing = get(port(), "/v1/models/gpt-4");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.data()["error"]["code"], "model_not_found");
  auto nowhere = get(port(), "/v2/anything");
  EXPECT_EQ(nowhere.status, 404);
  EXPECT_EQ(nowhere.data()["error"]["code"], "unknown_url");
  auto metrics = get(port(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  for (const char* family : {"dew_requests_total", "dew_prompt_tokens_total", "dew_prompt_tokens_cached_total",
                             "dew_generation_tokens_total", "dew_queue_depth",
                             "dew_batch_size", "dew_time_to_first_token_seconds_bucket", "dew_generation_tokens_per_second"}) {
    EXPECT_NE(metrics.body.find(family), std::string::npos) << family;
  }
}

TEST_F(ServeHttp, ChatAnswersLikeDewChat) {
  auto reply = post(port(), "/v1/chat/completions", chat_body().dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto data = reply.data();
  EXPECT_EQ(data["object"], "chat.completion");
  EXPECT_EQ(data["model"], "llama");
  EXPECT_EQ(data["choices"][0]["message"]["role"], "assistant");
  EXPECT_GT(data["usage"]["prompt_tokens"].get<int>(), 5);
  EXPECT_LE(data["usage"]["completion_tokens"].get<int>(), 6);
  EXPECT_EQ(data["usage"]["total_tokens"], data["usage"]["prompt_tokens"].get<int>() + data["usage"]["completion_tokens"].get<int>());
  // Greedy through the server = greedy through `dew chat` (same template, same engine).
  auto chat = dew::test::run_command(dew::test::dew_single_threaded("chat '" + dew::test::tiny_chat_gguf().string() +
                                                                    "' --prompt 'The capital of France?' --max-new-tokens 6"));
  ASSERT_EQ(chat.status, 0) << chat.output;
  std::string expected = chat.output.substr(0, chat.output.size() - 1);  // its newline
  EXPECT_EQ(data["choices"][0]["message"]["content"], dew::serve::valid_utf8(expected));
}

TEST_F(ServeHttp, StreamEqualsTheWholeAnswerAndEndsWithUsage) {
  auto whole = post(port(), "/v1/chat/completions", chat_body({{"max_tokens", 12}}).dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto events = post_stream(port(), "/v1/chat/completions",
                            chat_body({{"max_tokens", 12}, {"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  auto first = json::parse(events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string text, finish;
  for (std::size_t i = 0; i + 2 < events.size(); ++i) {
    auto chunk = json::parse(events[i]);
    ASSERT_EQ(chunk["choices"].size(), 1u) << events[i];
    EXPECT_TRUE(chunk["usage"].is_null());
    const auto& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  auto usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  const auto whole_data = whole.data();
  const auto& streamed = usage["usage"];
  const auto& answered = whole_data["usage"];
  for (const char* field : {"prompt_tokens", "completion_tokens", "total_tokens"}) EXPECT_EQ(streamed[field], answered[field]) << field;
  // The prefix cache: the same prompt again finds it in the row the whole answer left, all but its last
  // token (whose forward gives the first new token's logits).
  EXPECT_EQ(streamed["prompt_tokens_details"]["cached_tokens"], answered["prompt_tokens"].get<int>() - 1);
  EXPECT_EQ(text, whole.data()["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, whole.data()["choices"][0]["finish_reason"]);
}

TEST_F(ServeHttp, CompletionsWithLogprobsEchoAndSeveralChoices) {
  auto reply = post(port(), "/v1/completions",
                    json{{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 3}, {"ignore_eos", true}}.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto data = reply.data();
  EXPECT_EQ(data["object"], "text_completion");
  const auto& logprobs = data["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), 5u);
  EXPECT_EQ(logprobs["token_logprobs"].size(), 5u);
  // Up to 3: the legacy shape is an object keyed by token text, and two byte tokens can share a text.
  EXPECT_GE(logprobs["top_logprobs"][0].size(), 1u);
  EXPECT_LE(logprobs["top_logprobs"][0].size(), 3u);
  for (const auto& lp : logprobs["token_logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
  EXPECT_EQ(logprobs["text_offset"][0], 0);
  EXPECT_EQ(data["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(data["usage"]["completion_tokens"], 5);

  auto echo = post(port(), "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0}, {"echo", true}}.dump());
  ASSERT_EQ(echo.status, 200) << echo.body;
  EXPECT_EQ(echo.data()["choices"][0]["text"].get<std::string>().rfind("Once upon a time", 0), 0u);

  // echo with logprobs: the prompt's tokens scored too, the first with nulls (nothing predicts it), as OpenAI
  // answers; the generated entries are the plain request's, their offsets after the echoed prompt.
  auto scored = post(port(), "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0},
                                                     {"logprobs", 3}, {"echo", true}, {"ignore_eos", true}}.dump());
  ASSERT_EQ(scored.status, 200) << scored.body;
  const auto scored_data = scored.data();
  const auto& all = scored_data["choices"][0]["logprobs"];
  const auto prompt_tokens = scored_data["usage"]["prompt_tokens"].get<std::size_t>();
  ASSERT_EQ(all["tokens"].size(), prompt_tokens + 3) << all;
  ASSERT_EQ(all["token_logprobs"].size(), prompt_tokens + 3);
  EXPECT_TRUE(all["token_logprobs"][0].is_null());
  EXPECT_TRUE(all["top_logprobs"][0].is_null());
  std::string prompt_text;
  for (std::size_t i = 0; i < prompt_tokens; ++i) {
    EXPECT_EQ(all["text_offset"][i].get<std::size_t>(), prompt_text.size()) << i;  // ASCII: bytes = code points
    prompt_text += all["tokens"][i].get<std::string>();
    if (i == 0) continue;
    EXPECT_LE(all["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_GE(all["top_logprobs"][i].size(), 1u);
  }
  EXPECT_EQ(prompt_text, "Once upon a time");
  for (std::size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(all["tokens"][prompt_tokens + t], logprobs["tokens"][t]);
    EXPECT_NEAR(all["token_logprobs"][prompt_tokens + t].get<double>(), logprobs["token_logprobs"][t].get<double>(), 1e-6);
    EXPECT_EQ(all["text_offset"][prompt_tokens + t].get<std::size_t>(), 16 + logprobs["text_offset"][t].get<std::size_t>());
  }

  auto several = post(port(), "/v1/completions",
                      json{{"prompt", {"a b", "c d"}}, {"n", 2}, {"max_tokens", 3}, {"seed", 7}, {"temperature", 1.0}}.dump());
  ASSERT_EQ(several.status, 200) << several.body;
  ASSERT_EQ(several.data()["choices"].size(), 4u);  // 2 prompts x n = 2, index = prompt * n + j
  for (int i = 0; i < 4; ++i) EXPECT_EQ(several.data()["choices"][i]["index"], i);
  // Same seed, same answers.
  auto again = post(port(), "/v1/completions",
                    json{{"prompt", {"a b", "c d"}}, {"n", 2}, {"max_tokens", 3}, {"seed", 7}, {"temperature", 1.0}}.dump());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(again.data()["choices"][i]["text"], several.data()["choices"][i]["text"]);
}

TEST_F(ServeHttp, StopStringsCutTheOutput) {
  json base = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  auto plain = post(port(), "/v1/completions", base.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  std::string text = plain.data()["choices"][0]["text"];
  // A stop string from inside the greedy text (two whole characters from its middle; the tiny model's
  // text is mostly odd bytes, replaced or not): the answer is what comes before its first occurrence.
  auto boundary = [&](std::size_t at) {
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    return at;
  };
  std::size_t cut = boundary(text.size() / 2);
  std::size_t end = boundary(boundary(cut + 1) + 1);
  ASSERT_LT(cut, end) << text;
  std::string stop = text.substr(cut, end - cut);
  base["stop"] = {stop};
  auto stopped = post(port(), "/v1/completions", base.dump());
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  EXPECT_EQ(stopped.data()["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(stopped.data()["choices"][0]["finish_reason"], "stop");
  base["stream"] = true;
  std::string streamed;
  for (const auto& event : post_stream(port(), "/v1/completions", base)) {
    if (event == "[DONE]") break;
    streamed += json::parse(event)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, text.substr(0, text.find(stop)));
}

TEST_F(ServeHttp, BadRequestsGetOpenAIErrors) {
  auto invalid = post(port(), "/v1/chat/completions", "{\"messages\": [");
  EXPECT_EQ(invalid.status, 400);
  EXPECT_EQ(invalid.data()["error"]["type"], "invalid_request_error");

  auto text_plain = post(port(), "/v1/chat/completions", chat_body().dump(), kKey, "text/plain");
  EXPECT_EQ(text_plain.status, 415);
  EXPECT_NE(text_plain.data()["error"]["message"].get<std::string>().find("application/json"), std::string::npos);

  auto missing = post(port(), "/v1/chat/completions", json{{"model", "llama"}}.dump());
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(error_param(missing), "messages");

  auto hot = post(port(), "/v1/chat/completions", chat_body({{"temperature", 3}}).dump());
  EXPECT_EQ(hot.status, 400);
  EXPECT_EQ(error_param(hot), "temperature");
  EXPECT_NE(hot.data()["error"]["message"].get<std::string>().find("3"), std::string::npos);

  auto wrong_model = post(port(), "/v1/chat/completions", chat_body({{"model", "gpt-4o"}}).dump());
  EXPECT_EQ(wrong_model.status, 404);
  EXPECT_EQ(wrong_model.data()["error"]["code"], "model_not_found");

  auto unknown_fields = post(port(), "/v1/chat/completions", chat_body({{"a_field_from_2030", {{"x", 1}}}, {"user", "me"}}).dump());
  EXPECT_EQ(unknown_fields.status, 200) << unknown_fields.body;

  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "word ";
  auto too_long = post(port(), "/v1/completions", json{{"prompt", long_prompt}}.dump());
  EXPECT_EQ(too_long.status, 400);
  EXPECT_EQ(too_long.data()["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(error_param(too_long), "prompt");

  auto too_many = post(port(), "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 1000}}.dump());
  EXPECT_EQ(too_many.status, 400);
  EXPECT_EQ(error_param(too_many), "max_tokens");

  auto no_key = post(port(), "/v1/chat/completions", chat_body().dump(), "");
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(no_key.data()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post(port(), "/v1/chat/completions", chat_body().dump(), "wrong-key").status, 401);
  EXPECT_EQ(get(port(), "/v1/models", "").status, 401);
}

TEST_F(ServeHttp, BodyPastTheLimitIs413) {
  RawConnection connection(port());
  ASSERT_TRUE(connection.connected());
  // Only the headers: the server answers from Content-Length alone (the server's limit is 65536), and
  // no unread body makes its close a reset that could discard the answer.
  connection.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " +
                  std::string(kKey) + "\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{");
  auto response = connection.read_all(dew::test::kWaitDeadline);  // it closes the connection after its answer
  EXPECT_EQ(response.rfind("HTTP/1.1 413", 0), 0u) << response.substr(0, 200);
  EXPECT_NE(response.find("\"error\""), std::string::npos) << response;
}

TEST_F(ServeHttp, StalledRequestIsDroppedAndOthersAreServed) {
  RawConnection slow(port());
  ASSERT_TRUE(slow.connected());
  // With the key and a JSON content type, so nothing is refused before the body is read.
  slow.send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
            "\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"messages\"");
  // While it stalls, others are answered.
  EXPECT_EQ(get(port(), "/health", "").status, 200);
  // Dropped after --read-timeout 2 and httplib's keep-alive wait of 5 s after its 400; a server that never
  // drops it keeps it open past the deadline.
  bool closed = false;
  slow.read_all(dew::test::kWaitDeadline, &closed);
  EXPECT_TRUE(closed) << "the server kept a stalled connection open for " << dew::test::kWaitDeadline.count() << " s";
  EXPECT_EQ(get(port(), "/health", "").status, 200);
}

// A full queue answers 429 at once; a client that leaves mid-stream frees its place for the next one.
TEST(ServeHttpLoad, FullQueueIs429AndALeavingClientFreesItsSlot) {
  ServeProcess server("'" + dew::test::tiny_long_context_model().string() + "' --ctx 32768 --api-key " + kKey + " --max-batch 1 --max-queue 1");
  ASSERT_GT(server.port(), 0) << server.output();
  const int port = server.port();
  // Two requests that would run for a long time: one decoding, one queued. Raw sockets that never read.
  std::string body = json{{"prompt", "Once"}, {"max_tokens", 30000}, {"ignore_eos", true}, {"stream", true}}.dump();
  std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
                        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  RawConnection first(port), second(port);
  ASSERT_TRUE(first.send(request));
  ASSERT_TRUE(second.send(request));
  ASSERT_TRUE(wait_until([&] { return outstanding(port, 2); })) << get(port, "/metrics").body;  // both accepted
  // At once: a server that queued it anyway would answer 200 only after the 30000 tokens ahead of it.
  auto full = post(port, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump());
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.data()["error"]["type"], "rate_limit_error");

  // Both clients leave; their requests are cancelled and the next one is served.
  first.close();
  second.close();
  Reply next;
  wait_until([&] {
    next = post(port, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump());
    return next.status != 429;
  });
  EXPECT_EQ(next.status, 200) << next.body;
  // They were cut short, not run to their 30000 tokens.
  EXPECT_LT(generated_tokens(port), 30000) << get(port, "/metrics").body;
  EXPECT_EQ(server.stop(SIGTERM, std::chrono::seconds(30)), 0) << server.output();
}

TEST(ServeHttpLoad, StreamingClientLeavingMidStreamIsCancelled) {
  ServeProcess server("'" + dew::test::tiny_long_context_model().string() + "' --ctx 32768 --api-key " + kKey + " --max-batch 1 --max-queue 0");
  ASSERT_GT(server.port(), 0) << server.output();
  // Reads a few events, then drops the connection.
  auto events = post_stream(server.port(), "/v1/chat/completions",
                            chat_body({{"model", nullptr}, {"max_tokens", 30000}, {"ignore_eos", true}, {"stream", true}}),
                            [](const std::string& received) { return received.size() < 600; });
  EXPECT_GE(events.size(), 2u);
  Reply next;
  wait_until([&] {
    next = post(server.port(), "/v1/chat/completions", chat_body({{"model", nullptr}, {"max_tokens", 2}}).dump());
    return next.status != 429;
  });
  EXPECT_EQ(next.status, 200) << next.body;
  // The slot was freed by the cancellation, not by the request running to its 30000 tokens.
  EXPECT_LT(generated_tokens(server.port()), 30000) << get(server.port(), "/metrics").body;
  EXPECT_EQ(server.stop(SIGTERM, std::chrono::seconds(30)), 0) << server.output();
}

// A client waiting for a whole (non-streaming) answer that closes its connection is noticed from the
// kernel's TCP table (the server's side turns CLOSE_WAIT): its job is cancelled and its slot serves the next
// request long before its 30000 tokens, and /metrics counts it under status 499.
TEST(ServeHttpLoad, ClientLeavingAWholeAnswerIsCancelled) {
  ServeProcess server("'" + dew::test::tiny_long_context_model().string() + "' --ctx 32768 --api-key " + kKey + " --max-batch 1 --max-queue 0");
  ASSERT_GT(server.port(), 0) << server.output();
  const int port = server.port();
  std::string body = json{{"prompt", "Once"}, {"max_tokens", 30000}, {"ignore_eos", true}}.dump();
  RawConnection leaving(port);
  ASSERT_TRUE(leaving.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kKey) +
                           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                           "\r\n\r\n" + body));
  ASSERT_TRUE(wait_until([&] { return outstanding(port, 1); })) << get(port, "/metrics").body;
  EXPECT_EQ(post(port, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump()).status, 429);  // the slot is taken
  leaving.close();
  Reply next;
  wait_until([&] {
    next = post(port, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump());
    return next.status != 429;
  });
  EXPECT_EQ(next.status, 200) << next.body;
  auto metrics = get(port, "/metrics").body;
  EXPECT_NE(metrics.find("status=\"499\"} 1"), std::string::npos) << metrics;
  EXPECT_LT(generated_tokens(port), 30000) << metrics;
  EXPECT_EQ(server.stop(SIGTERM, std::chrono::seconds(30)), 0) << server.output();
}

// SIGTERM: the request in flight finishes, new ones are refused, the process exits 0.
TEST(ServeHttpLoad, SigtermFinishesInFlightRequestsAndExitsZero) {
  ServeProcess server("'" + dew::test::tiny_long_context_model().string() + "' --ctx 32768 --shutdown-grace 20");
  ASSERT_GT(server.port(), 0) << server.output();
  const int port = server.port();
  std::vector<std::string> events;
  std::thread client([&] {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(120, 0);
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.body = json{{"prompt", "Once"}, {"max_tokens", 3000}, {"ignore_eos", true}, {"stream", true}}.dump();
    request.set_header("Content-Type", "application/json");
    std::string received;
    request.content_receiver = [&](const char* data, std::size_t length, std::uint64_t, std::uint64_t) {
      received.append(data, length);
      return true;
    };
    httplib::Response response;
    httplib::Error error;
    http.send(request, response, error);
    events.push_back(received);
  });
  // Signal once it is generating.
  EXPECT_TRUE(wait_until([&] { return outstanding(port, 1); })) << get(port, "/metrics", "").body;
  int status = server.stop(SIGTERM, std::chrono::seconds(60));
  client.join();
  EXPECT_EQ(status, 0) << server.output();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].find("\"finish_reason\":\"length\""), std::string::npos) << events[0].substr(0, 300);
  EXPECT_NE(events[0].find("data: [DONE]"), std::string::npos);
  EXPECT_NE(server.output().find("SIGTERM received; finishing 1 running request(s)"), std::string::npos) << server.output();
}

// SIGTERM with a request that would outlive the grace period: new requests get 503 meanwhile, the stream
// ends with an error event when the grace runs out, and the process still exits 0.
TEST(ServeHttpLoad, SigtermCancelsWhatOutlivesTheGracePeriod) {
  ServeProcess server("'" + dew::test::tiny_long_context_model().string() + "' --ctx 32768 --shutdown-grace 2");
  ASSERT_GT(server.port(), 0) << server.output();
  const int port = server.port();
  std::string received;
  std::thread client([&] {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(120, 0);
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.body = json{{"prompt", "Once"}, {"max_tokens", 30000}, {"ignore_eos", true}, {"stream", true}}.dump();
    request.set_header("Content-Type", "application/json");
    request.content_receiver = [&](const char* data, std::size_t length, std::uint64_t, std::uint64_t) {
      received.append(data, length);
      return true;
    };
    httplib::Response response;
    httplib::Error error;
    http.send(request, response, error);
  });
  EXPECT_TRUE(wait_until([&] { return outstanding(port, 1); })) << get(port, "/metrics", "").body;
  std::thread stopper([&] { EXPECT_EQ(server.stop(SIGTERM, std::chrono::seconds(60)), 0) << server.output(); });
  // Draining: /health says so (503) from the moment new requests are refused, within the 2-s grace.
  EXPECT_TRUE(wait_until([&] { return get(port, "/health", "").status == 503; })) << server.output();
  auto refused = post(port, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}.dump(), "");
  EXPECT_EQ(refused.status, 503) << refused.body;
  stopper.join();
  client.join();
  EXPECT_NE(received.find("shutting_down"), std::string::npos) << received.substr(received.size() > 300 ? received.size() - 300 : 0);
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos);
  EXPECT_NE(server.output().find("cancelling 1 request(s)"), std::string::npos) << server.output();
}

// An empty key is refused whether it comes from --api-key or from DEW_API_KEY: before, an empty variable
// started the server without authentication. `timeout` bounds the old behaviour (a server that never exits).
TEST(ServeHttpStart, AnEmptyApiKeyIsRefusedFromTheFlagAndFromTheEnvironment) {
  const std::string serve = "DEW_THREADS=1 timeout 60 '" + dew::test::dew_binary().string() + "' serve '" +
                            dew::test::tiny_chat_gguf().string() + "' --port 0";
  auto from_env = dew::test::run_command("DEW_API_KEY= " + serve);
  EXPECT_EQ(from_env.status, 1) << from_env.output;
  EXPECT_NE(from_env.output.find("DEW_API_KEY is set but empty"), std::string::npos) << from_env.output;
  EXPECT_EQ(from_env.output.find("listening on"), std::string::npos) << from_env.output;
  auto from_flag = dew::test::run_command("unset DEW_API_KEY; " + serve + " --api-key ''");
  EXPECT_EQ(from_flag.status, 1) << from_flag.output;
  EXPECT_NE(from_flag.output.find("--api-key is empty"), std::string::npos) << from_flag.output;
}
