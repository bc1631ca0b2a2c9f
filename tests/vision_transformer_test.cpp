// I-JEPA's encoder and predictor (nn/vision/vision_transformer.h): shapes, patch selection, positions, the
// gradient paths a JEPA step relies on, and config errors.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include "dew/nn/vision/vision_transformer.h"
#include "test_support.h"

namespace {

using namespace dew::nn::vision;

VisionTransformerConfig tiny() {
  VisionTransformerConfig c;
  c.image_size = 8, c.patch_size = 2, c.dim = 16, c.depth = 2, c.heads = 2;
  c.predictor_dim = 8, c.predictor_depth = 1, c.predictor_heads = 2;
  return c;
}

at::Generator gen(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

TEST(VisionTransformer, EncodesAllOrSelectedPatches) {
  VisionTransformer encoder(tiny());
  const auto images = at::randn({3, 1, 8, 8}, gen(1));
  const auto all = encoder->forward(images);
  EXPECT_EQ(all.sizes(), (std::vector<std::int64_t>{3, 16, 16}));
  // Keeping every patch in order is the full forward, exactly.
  EXPECT_TRUE(at::equal(encoder->forward(images, at::arange(16).expand({3, 16}).contiguous()), all));
  // A subset attends only within itself: another result than the same rows of the full forward.
  const auto keep = at::tensor({0, 5, 6, 15}, at::kLong).expand({3, 4}).contiguous();
  const auto part = encoder->forward(images, keep);
  EXPECT_EQ(part.sizes(), (std::vector<std::int64_t>{3, 4, 16}));
  EXPECT_FALSE(at::allclose(part, gather_patches(all, keep)));
}

TEST(VisionTransformer, PredictorPlacesItsQueriesByPosition) {
  const auto c = tiny();
  VisionTransformer encoder(c);
  JepaPredictor predictor(c);
  const auto images = at::randn({2, 1, 8, 8}, gen(2));
  const auto context_idx = at::tensor({0, 1, 2, 4, 8, 9}, at::kLong).expand({2, 6}).contiguous();
  const auto context = encoder->forward(images, context_idx);
  // Two target blocks of 3 patches; the second block's patches are the first's shifted by one column.
  const auto target_idx = at::tensor({10, 11, 14, 11, 12, 15}, at::kLong).reshape({1, 2, 3}).expand({2, 2, 3}).contiguous();
  const auto out = predictor->forward(context, context_idx, target_idx);
  EXPECT_EQ(out.sizes(), (std::vector<std::int64_t>{2, 2, 3, 16}));
  // The same context, mask tokens at other positions: other predictions (the positions are what tells the
  // predictor where to look).
  EXPECT_FALSE(at::allclose(out.select(1, 0), out.select(1, 1)));
  EXPECT_TRUE(at::isfinite(out).all().item<bool>());
}

TEST(VisionTransformer, GradientsReachContextEncoderAndPredictorButNotATargetUnderNoGrad) {
  const auto c = tiny();
  VisionTransformer context_encoder(c), target_encoder(c);
  JepaPredictor predictor(c);
  const auto images = at::randn({2, 1, 8, 8}, gen(3));
  const auto context_idx = at::tensor({0, 1, 2, 3, 4, 5, 6, 7}, at::kLong).expand({2, 8}).contiguous();
  const auto target_idx = at::tensor({9, 10, 13, 14}, at::kLong).reshape({1, 1, 4}).expand({2, 1, 4}).contiguous();
  at::Tensor target;
  {
    at::NoGradGuard no_grad;
    target = gather_patches(target_encoder->forward(images), target_idx.flatten(1)).reshape({2, 1, 4, 16});
  }
  const auto prediction = predictor->forward(context_encoder->forward(images, context_idx), context_idx, target_idx);
  at::smooth_l1_loss(prediction, target).backward();
  for (const auto& p : context_encoder->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  for (const auto& p : predictor->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  for (const auto& p : target_encoder->named_parameters()) EXPECT_FALSE(p.value().grad().defined()) << p.key();
  EXPECT_GT(predictor->mask_token.grad().abs().sum().item<double>(), 0.0);
}

TEST(VisionTransformer, RefusesSizesThatDoNotFit) {
  auto c = tiny();
  c.patch_size = 3;
  EXPECT_NE(dew::test::error_of([&] { VisionTransformer v(c); }).find("model.patch_size = 3"), std::string::npos);
  c = tiny();
  c.predictor_heads = 3;
  EXPECT_NE(dew::test::error_of([&] { JepaPredictor p(c); }).find("model.predictor_heads = 3"), std::string::npos);
}

}  // namespace
