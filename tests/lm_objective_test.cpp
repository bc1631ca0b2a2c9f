// LMObjective: the loss and gradients equal transformers' mean next-token CE (fixtures), the chunked
// cross entropy equals the plain one, and the masks (padding, document boundaries, roles) weight targets
// out exactly: packed rows give the loss of the same documents unpacked.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/nn/parameters.h"
#include "dew/objectives/lm_objective.h"
#include "test_support.h"

namespace {
using dew::objectives::LMObjective;
using dew::objectives::LMObjectiveConfig;

dew::nn::CausalTransformer fixture_model(const std::string& name) {
  dew::nn::CausalTransformerConfig config;
  auto dir = dew::test::fixtures() / "lm" / name;
  dew::config::from_json(dew::config::parse_json_file(dir / "config.json"), config, "config.json");
  dew::nn::CausalTransformer model(config);
  dew::nn::load_parameters(*model, dew::formats::SafetensorsFile(dir / "weights.safetensors"));
  return model;
}

dew::data::Batch text_batch(const at::Tensor& text) {
  dew::data::Batch batch;
  batch.set("text", text);
  return batch;
}

std::map<std::string, at::Tensor> gradients_of(LMObjective& objective, const dew::data::Batch& batch) {
  objective.module().zero_grad();
  auto loss = objective.loss(batch, 0);
  (loss.sum / loss.count).backward();
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, p] : dew::nn::parameter_map(objective.module())) {
    if (p.requires_grad()) out[name] = p.grad().clone();
  }
  return out;
}

TEST(LMObjective, MatchesTransformersMeanCrossEntropyAndGradients) {
  for (std::string family : {"qwen3", "llama"}) {
    dew::formats::SafetensorsFile io(dew::test::fixtures() / "lm" / family / "io.safetensors");
    auto text = io.load("text");
    LMObjective objective(fixture_model(family), {.seq_len = text.size(1) - 1});
    auto grads = gradients_of(objective, text_batch(text));
    auto loss = objective.loss(text_batch(text), 0);
    EXPECT_EQ(loss.count, text.size(0) * (text.size(1) - 1));
    EXPECT_NEAR(loss.sum.item<double>() / loss.count, io.load("loss").item<double>(), 1e-6) << family;
    EXPECT_NEAR(loss.metrics.mean("ce"), io.load("loss").item<double>(), 1e-6);
    dew::formats::SafetensorsFile expected(dew::test::fixtures() / "lm" / family / "grads.safetensors");
    for (const auto& [name, g] : grads) {
      auto want = expected.load(name);
      double scale = std::max(1e-3, want.abs().max().item<double>());
      EXPECT_LT((g - want).abs().max().item<double>() / scale, 1e-4) << family << " " << name;
    }
  }
}

TEST(LMObjective, ChunkedCrossEntropyEqualsPlain) {
  dew::formats::SafetensorsFile io(dew::test::fixtures() / "lm" / "qwen3" / "io.safetensors");
  auto text = io.load("text");
  auto S = text.size(1) - 1;
  LMObjective plain(fixture_model("qwen3"), {.seq_len = S});
  LMObjective chunked(fixture_model("qwen3"), {.seq_len = S, .loss = {.loss_chunk_tokens = 3}});
  auto a = gradients_of(plain, text_batch(text));
  auto b = gradients_of(chunked, text_batch(text));
  EXPECT_NEAR(plain.loss(text_batch(text), 0).sum.item<double>(), chunked.loss(text_batch(text), 0).sum.item<double>(), 1e-4);
  EXPECT_NEAR(plain.loss(text_batch(text), 0).metrics.mean("token_accuracy"),
              chunked.loss(text_batch(text), 0).metrics.mean("token_accuracy"), 1e-12);
  for (const auto& [name, g] : a) EXPECT_LT((g - b.at(name)).abs().max().item<double>(), 1e-6) << name;
}

TEST(LMObjective, ChunkedGradientsWithAFrozenOutputProjectionEqualPlain) {
  // LoRA's case: the output projection (tied to the embedding here) does not train, so the chunked loss
  // computes only the hidden states' gradient, in its forward pass.
  dew::formats::SafetensorsFile io(dew::test::fixtures() / "lm" / "qwen3" / "io.safetensors");
  auto text = io.load("text");
  auto make = [&](std::int64_t chunk) {
    auto model = fixture_model("qwen3");
    model->output_weight().set_requires_grad(false);
    return LMObjective(model, {.seq_len = text.size(1) - 1, .loss = {.loss_chunk_tokens = chunk}});
  };
  auto plain = make(0), chunked = make(4);
  auto a = gradients_of(plain, text_batch(text)), b = gradients_of(chunked, text_batch(text));
  ASSERT_EQ(a.size(), b.size());
  ASSERT_LT(a.size(), dew::nn::parameter_map(plain.module()).size());  // the projection really is frozen
  // fp32 sums over ~30 tokens in a different grouping: differences at the 1e-7 level of O(1) entries.
  for (const auto& [name, g] : a) EXPECT_LT((g - b.at(name)).abs().max().item<double>(), 1e-6) << name;
  EXPECT_NEAR(plain.loss(text_batch(text), 0).sum.item<double>(), chunked.loss(text_batch(text), 0).sum.item<double>(), 1e-4);
}

TEST(LMObjective, SoftcappedChunkedGradientsEqualPlain) {
  auto make = [](std::int64_t chunk) {
    auto model = fixture_model("llama");
    auto config = model->config();
    config.final_logit_softcap = 2.0;
    dew::nn::CausalTransformer capped(config);
    capped->init_parameters(3);
    return LMObjective(capped, {.seq_len = 10, .loss = {.loss_chunk_tokens = chunk}});
  };
  dew::formats::SafetensorsFile io(dew::test::fixtures() / "lm" / "llama" / "io.safetensors");
  auto text = io.load("text");
  auto plain = make(0), chunked = make(4);
  auto a = gradients_of(plain, text_batch(text)), b = gradients_of(chunked, text_batch(text));
  for (const auto& [name, g] : a) EXPECT_LT((g - b.at(name)).abs().max().item<double>(), 1e-6) << name;
}

TEST(LMObjective, PackedRowEqualsDocumentsUnpacked) {
  // Two documents packed into one row of seq_len + 1 = 10 (then padding) score the same summed loss as
  // each document alone: no target crosses the boundary and padding contributes nothing.
  LMObjective objective(fixture_model("qwen3"), {.seq_len = 9});
  at::NoGradGuard no_grad;
  auto doc_a = at::tensor({5, 9, 2, 33}, at::kLong), doc_b = at::tensor({40, 1, 12, 8}, at::kLong);
  dew::data::Batch packed;
  packed.set("text", at::cat({doc_a, doc_b, at::zeros({2}, at::kLong)}).unsqueeze(0));
  packed.set("text_segment_ids", at::tensor({1, 1, 1, 1, 2, 2, 2, 2, 0, 0}, at::kLong).unsqueeze(0));
  packed.set("text_positions", at::tensor({0, 1, 2, 3, 0, 1, 2, 3, 0, 0}, at::kLong).unsqueeze(0));
  auto together = objective.loss(packed, 0);
  EXPECT_EQ(together.count, 6);  // 3 targets per document

  LMObjective short_rows(fixture_model("qwen3"), {.seq_len = 3});
  auto a = short_rows.loss(text_batch(doc_a.unsqueeze(0)), 0);
  auto b = short_rows.loss(text_batch(doc_b.unsqueeze(0)), 0);
  EXPECT_NEAR(together.sum.item<double>(), a.sum.item<double>() + b.sum.item<double>(), 1e-4);
}

TEST(LMObjective, LossRoleSelectsTargets) {
  LMObjective objective(fixture_model("qwen3"), {.seq_len = 5, .loss = {.loss_role = 2}});
  dew::data::Batch batch;
  batch.set("text", at::tensor({1, 2, 3, 4, 5, 6}, at::kLong).unsqueeze(0));
  batch.set("text_roles", at::tensor({1, 1, 1, 2, 2, 2}, at::kLong).unsqueeze(0));
  EXPECT_EQ(objective.loss(batch, 0).count, 3);
}

TEST(LMObjective, RefusesBadBatches) {
  LMObjective objective(fixture_model("qwen3"), {.seq_len = 4});
  EXPECT_THROW(objective.loss(text_batch(at::tensor({1, 2, 3}, at::kLong).unsqueeze(0)), 0), dew::Error);  // wrong width
  try {
    objective.loss(text_batch(at::tensor({1, 2, 3, 4, 640}, at::kLong).unsqueeze(0)), 0);
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("640"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LMObjective(fixture_model("qwen3"), {.seq_len = 64}), dew::Error);  // > max_seq_len
}

}  // namespace
