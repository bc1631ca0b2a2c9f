// generation_config.json and a GGUF's general.sampling.* read into GenerationDefaults (interop/generation_config.h),
// and dew serve's request defaults taken from them (serve/openai_request.h).
#include <gtest/gtest.h>

#include "dew/formats/gguf_writer.h"
#include "dew/interop/generation_config.h"
#include "dew/runs/tokenizer_source.h"
#include "dew/serve/job_builder.h"
#include "dew/serve/openai_request.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::interop::read_generation_config;
using dew::test::error_of;
using dew::test::TempDir;

namespace {
fs::path write_config(const TempDir& dir, const std::string& json) {
  dew::test::write_text(dir.path() / "generation_config.json", json);
  return dir.path() / "generation_config.json";
}
}  // namespace

TEST(GenerationConfig, ReadsQwenStyleSamplingDefaults) {
  TempDir dir;
  auto file = write_config(dir, R"({"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true,
    "eos_token_id": [151645, 151643], "repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8, "top_k": 20,
    "min_p": 0.05, "max_new_tokens": 300, "max_length": 2048, "transformers_version": "4.37.0"})");
  auto d = read_generation_config(file);
  EXPECT_EQ(d.source, file.string());
  EXPECT_EQ(d.temperature, 0.7);
  EXPECT_EQ(d.top_p, 0.8);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_EQ(d.min_p, 0.05);
  EXPECT_EQ(d.repetition_penalty, 1.05);
  EXPECT_EQ(d.max_new_tokens, 300);
  EXPECT_EQ(d.max_length, 2048);
  EXPECT_EQ(d.eos_ids, (std::vector<std::int64_t>{151645, 151643}));
  EXPECT_TRUE(d.temperature_reason.empty());
}

TEST(GenerationConfig, DoSampleDecidesGreedyAndTransformersDefaultsFillTheRest) {
  TempDir dir;
  // do_sample true without temperature or top_k: transformers' 1 and 50.
  auto sampled = read_generation_config(write_config(dir, R"({"do_sample": true, "eos_token_id": 2})"));
  EXPECT_EQ(sampled.temperature, 1.0);
  EXPECT_EQ(sampled.top_k, 50);
  EXPECT_NE(sampled.top_k_reason.find("transformers' 50"), std::string::npos);
  EXPECT_EQ(sampled.eos_ids, (std::vector<std::int64_t>{2}));
  // do_sample false: greedy whatever temperature says.
  auto greedy = read_generation_config(write_config(dir, R"({"do_sample": false, "temperature": 0.6, "top_p": 0.9})"));
  EXPECT_EQ(greedy.temperature, 0.0);
  EXPECT_EQ(greedy.temperature_reason, "do_sample is false: greedy");
  EXPECT_EQ(greedy.top_p, 0.9);
  // Absent: the command's own default (dew export writes such a file).
  auto ids_only = read_generation_config(write_config(dir, R"({"_from_model_config": true, "bos_token_id": 1, "eos_token_id": 2})"));
  EXPECT_FALSE(ids_only.temperature.has_value());
  EXPECT_FALSE(ids_only.top_k.has_value());
}

TEST(GenerationConfig, MalformedValuesNameTheFileTheFieldAndTheValue) {
  TempDir dir;
  auto file = write_config(dir, R"({"do_sample": true, "temperature": "hot"})");
  EXPECT_EQ(error_of([&] { read_generation_config(file); }),
            file.string() + ": field 'temperature' is \"hot\" and must be a number in [0, inf) (0 = greedy); fix or remove it in the file");
  write_config(dir, R"({"top_p": 1.5})");
  EXPECT_EQ(error_of([&] { read_generation_config(file); }),
            file.string() + ": field 'top_p' is 1.5 and is out of range; use a number in (0, 1] (1 = off); fix or remove it in the file");
  write_config(dir, R"({"eos_token_id": [2, -1]})");
  EXPECT_NE(error_of([&] { read_generation_config(file); }).find("field 'eos_token_id' is [2,-1] and must be a token id"),
            std::string::npos);
  write_config(dir, R"({"do_sample": "yes"})");
  EXPECT_NE(error_of([&] { read_generation_config(file); }).find("field 'do_sample' is \"yes\" and must be true or false"),
            std::string::npos);
  write_config(dir, "{\"temperature\": 0.7,");
  EXPECT_NE(error_of([&] { read_generation_config(file); }).find(file.string() + ": not valid JSON"), std::string::npos);
  write_config(dir, "[1, 2]");
  EXPECT_NE(error_of([&] { read_generation_config(file); }).find("must hold a JSON object"), std::string::npos);
}

TEST(GenerationConfig, FieldsAreReadInertOrRefusedByName) {
  TempDir dir;
  auto file = write_config(dir, R"({"num_beams": 4})");
  EXPECT_NE(error_of([&] { read_generation_config(file); }).find("field 'num_beams' is 4 and dew's sampler cannot do that"),
            std::string::npos);
  write_config(dir, R"({"do_sample": true, "typical_p": 0.9})");
  EXPECT_NE(error_of([&] { read_generation_config(file); }).find("field 'typical_p' is 0.9"), std::string::npos);
  write_config(dir, R"({"chat_format": "chatml"})");
  EXPECT_NE(error_of([&] { read_generation_config(file); })
                .find("field 'chat_format' (\"chatml\") is not a generation setting dew knows"),
            std::string::npos);
  // At their neutral values the unexpressible fields change nothing, and inert ones never do.
  write_config(dir, R"({"num_beams": 1, "typical_p": 1.0, "suppress_tokens": [], "bad_words_ids": null,
    "use_cache": true, "cache_implementation": "hybrid", "length_penalty": 2.0, "output_scores": false,
    "transformers_version": "5.0.0", "do_sample": true, "temperature": 0.5})");
  EXPECT_EQ(read_generation_config(file).temperature, 0.5);
}

TEST(GenerationConfig, GgufSamplingMetadataAsLlamaCppWritesIt) {
  TempDir dir;
  auto write = [&](const std::function<void(dew::formats::GgufWriter&)>& keys) {
    dew::formats::GgufWriter writer;
    writer.set_string("general.architecture", "llama");
    keys(writer);
    writer.write(dir.path() / "m.gguf");
    return dew::formats::GgufFile(dir.path() / "m.gguf");
  };
  auto none = dew::interop::read_gguf_sampling(write([](auto&) {}));
  EXPECT_TRUE(none.empty());

  auto with = dew::interop::read_gguf_sampling(write([](auto& w) {
    w.set_float32("general.sampling.temp", 0.6f);
    w.set_int32("general.sampling.top_k", 20);
    w.set_float32("general.sampling.top_p", 0.95f);
    w.set_float32("general.sampling.min_p", 0.0f);
    w.set_float32("general.sampling.penalty_repeat", 1.25f);
    w.set_int32("general.sampling.penalty_last_n", -1);
    w.set_string("general.sampling.sequence", "edskypmxt");
  }));
  EXPECT_EQ(with.source, (dir.path() / "m.gguf").string());
  EXPECT_FLOAT_EQ(static_cast<float>(*with.temperature), 0.6f);
  EXPECT_EQ(with.top_k, 20);
  EXPECT_FLOAT_EQ(static_cast<float>(*with.top_p), 0.95f);
  EXPECT_EQ(with.repetition_penalty, 1.25);

  auto window = [&] {
    dew::interop::read_gguf_sampling(write([](auto& w) {
      w.set_float32("general.sampling.penalty_repeat", 1.1f);
      w.set_int32("general.sampling.penalty_last_n", 64);
    }));
  };
  EXPECT_NE(error_of(window).find("general.sampling.penalty_last_n is 64"), std::string::npos) << error_of(window);
  auto mirostat = [&] { dew::interop::read_gguf_sampling(write([](auto& w) { w.set_int32("general.sampling.mirostat", 2); })); };
  EXPECT_NE(error_of(mirostat).find("general.sampling.mirostat is 2 and dew's sampler cannot do that"), std::string::npos);
}

TEST(GenerationConfig, ServeRequestsThatOmitAFieldGetTheModelsDefault) {
  dew::serve::RequestDefaults defaults{.temperature = 0.7, .top_p = 0.8, .top_k = 20, .min_p = 0.05,
                                       .repetition_penalty = 1.05, .max_tokens = 300};
  nlohmann::json body = nlohmann::json::object();
  body["messages"] = nlohmann::json::array({nlohmann::json{{"role", "user"}, {"content", "hi"}}});
  auto omitted = dew::serve::parse_chat_request(body, {}, defaults);
  EXPECT_EQ(omitted.temperature, 0.7);
  EXPECT_EQ(omitted.top_p, 0.8);
  EXPECT_EQ(omitted.top_k, 20);
  EXPECT_EQ(omitted.min_p, 0.05);
  EXPECT_EQ(omitted.repetition_penalty, 1.05);
  body["temperature"] = 0.0;
  body["top_k"] = -1;
  auto given = dew::serve::parse_chat_request(body, {}, defaults);
  EXPECT_EQ(given.temperature, 0.0);
  EXPECT_EQ(given.top_k, 0);
  EXPECT_EQ(given.top_p, 0.8);
  // Without defaults, OpenAI's.
  EXPECT_EQ(dew::serve::parse_completion_request(nlohmann::json{{"prompt", "x"}}).temperature, 1.0);
}

TEST(GenerationConfig, ServeMaxTokensDefaultsToTheModelsBudgetWhereItFits) {
  auto tokenizer = dew::runs::open_tokenizer("byte");
  dew::serve::ServedModel model{"m", &tokenizer, tokenizer.tokenizer->vocab_size(), 16, {.max_tokens = 5}};
  auto request = dew::serve::parse_completion_request(nlohmann::json{{"prompt", "abcd"}}, {}, model.defaults);
  EXPECT_EQ(dew::serve::build_job(request, model).job->requests[0].sampling.max_new_tokens, 5);
  model.defaults.max_tokens = 100;  // more than the context leaves: up to the context (16 - 4 prompt bytes)
  EXPECT_EQ(dew::serve::build_job(request, model).job->requests[0].sampling.max_new_tokens, 12);
  request.max_tokens = 7;  // the request's own wins
  EXPECT_EQ(dew::serve::build_job(request, model).job->requests[0].sampling.max_new_tokens, 7);
}
