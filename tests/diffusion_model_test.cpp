// DiT and UNet (src/dew/nn/diffusion/) against PyTorch references of the same architectures on the same
// weights (tools/reference/make_diffusion_model_fixtures.py: DiT as facebookresearch/DiT writes it, the UNet
// as diffusers' UNet2DModel): output, input gradient and parameter gradients; plus stable names and counts,
// FLOPs, adaLN-Zero / zero-init outputs, the null class, and refusals of bad configs and inputs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <set>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/nn/diffusion/dit.h"
#include "dew/nn/diffusion/image_model.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {
using dew::nn::diffusion::ImageModelConfig;
using dew::nn::diffusion::ImageModelImpl;
using dew::nn::diffusion::make_image_model;

std::filesystem::path fixture_dir() { return dew::test::fixtures() / "diffusion_models"; }

const dew::config::Json& summary() {
  static const auto json = dew::config::parse_json_file(fixture_dir() / "models.json");
  return json;
}

ImageModelConfig fixture_config(const std::string& kind) {
  ImageModelConfig config;
  dew::config::from_json(summary()[kind]["config"], config, "models.json");
  return config;
}

std::shared_ptr<ImageModelImpl> fixture_model(const std::string& kind) {
  auto model = make_image_model(fixture_config(kind), dew::nn::ParameterInit::none);
  dew::nn::load_parameters(*model, dew::formats::SafetensorsFile(fixture_dir() / (kind + ".safetensors")));
  return model;
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }
double relative_error(const at::Tensor& got, const at::Tensor& expected) { return max_abs(got - expected) / max_abs(expected); }

// Float32 rounding along the computation, relative to the largest value (the reference is float64 rounded
// once, so all of the difference is dew's float32 arithmetic). A matrix product, convolution or norm of K
// terms rounds with relative error ~ sqrt(K) * 2^-24 (errors of random sign; K * 2^-24 at worst), and the
// errors of the S stages on the longest chain add like a random walk: sqrt(S) * sqrt(K) * 6e-8, taken 4x.
// DiT here: S = 16 (patch conv, time MLP, 2 blocks x (modulation, LayerNorm, qkv, scores, weighted sum, proj,
// LayerNorm, fc1, fc2), final modulation and linear), K <= 256 (the time features): 4 * 4 * 16 * 6e-8 = 1.5e-5.
// UNet: S = 30 (conv_in, 2 convs in each of 12 residual blocks, 5 attentions, resampling, conv_out), K <= 288
// (a 3x3 conv over 32 concatenated channels): 4 * 5.5 * 17 * 6e-8 = 2.2e-5. The backward pass runs the chain
// again in reverse: gradients get twice that. (The worst case, S * K * 6e-8, would be 2.5e-4 and 5.2e-4.)
struct Bounds { double forward, backward; };
Bounds bounds(const std::string& kind) {
  constexpr double unit = 6e-8;
  const double forward = kind == "dit" ? 4 * std::sqrt(16.0) * std::sqrt(256.0) * unit : 4 * std::sqrt(30.0) * std::sqrt(288.0) * unit;
  return {forward, 2 * forward};
}

class ImageModelParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ImageModelParity, OutputAndGradientsMatchTheReference) {
  const auto kind = GetParam();
  auto model = fixture_model(kind);
  dew::formats::SafetensorsFile io(fixture_dir() / (kind + "_io.safetensors"));
  auto x = io.load("x").requires_grad_(true);
  auto out = model->forward(x, io.load("time"), io.load("labels"));
  const auto [forward_bound, backward_bound] = bounds(kind);
  EXPECT_LT(relative_error(out, io.load("out")), forward_bound);
  (out * io.load("w")).sum().backward();
  EXPECT_LT(relative_error(x.grad(), io.load("grad.x")), backward_bound);
  auto params = dew::nn::parameter_map(*model);
  std::size_t checked = 0;
  for (const auto& name : summary()[kind]["grads"]) {
    const auto n = name.get<std::string>();
    ASSERT_TRUE(params.count(n)) << n;
    EXPECT_LT(relative_error(params[n].grad(), io.load("grad." + n)), backward_bound) << n;
    ++checked;
  }
  EXPECT_GE(checked, 9u);

  // The comparison can fail: another label for the first image moves the output far outside the bound.
  at::NoGradGuard no_grad;
  auto labels = io.load("labels").clone();
  labels[0] = 7;
  EXPECT_GT(relative_error(model->forward(io.load("x"), io.load("time"), labels), io.load("out")), 100 * forward_bound);
}

INSTANTIATE_TEST_SUITE_P(Models, ImageModelParity, ::testing::Values("dit", "unet"));

class ImageModelShape : public ::testing::TestWithParam<std::string> {};

TEST_P(ImageModelShape, ParameterNamesCountAndFlopsAreStable) {
  const auto kind = GetParam();
  const auto config = fixture_config(kind);
  auto model = make_image_model(config);
  std::set<std::string> expected;
  for (const auto& name : summary()[kind]["parameters"]) expected.insert(name.get<std::string>());
  std::set<std::string> names;
  for (const auto& [name, p] : dew::nn::parameter_map(*model)) names.insert(name);
  EXPECT_EQ(names, expected);
  const auto count = summary()[kind]["parameter_count"].get<std::int64_t>();
  EXPECT_EQ(model->parameter_count(), count);
  EXPECT_EQ(dew::nn::diffusion::parameter_count(config), count);
  // torch.utils.flop_counter's count of the reference's forward pass (integers, exact in a double).
  EXPECT_EQ(dew::nn::diffusion::image_model_flops(config), summary()[kind]["forward_flops"].get<double>());
}

TEST_P(ImageModelShape, FreshModelOutputsExactlyZeroAndInitIsSeeded) {
  auto config = fixture_config(GetParam());
  auto model = make_image_model(config);
  at::NoGradGuard no_grad;
  auto x = at::randn({2, 1, 8, 8});
  auto out = model->forward(x, at::tensor({3.0f, 700.0f}), at::tensor({1, 10}));
  EXPECT_EQ(out.sizes(), x.sizes());
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  EXPECT_EQ(max_abs(out), 0.0);  // adaLN-Zero (DiT) / zero_module (UNet): exactly, not approximately

  auto again = make_image_model(config);
  auto other = make_image_model(config);
  other->init_parameters(1);
  auto a = dew::nn::parameter_map(*model), b = dew::nn::parameter_map(*again), c = dew::nn::parameter_map(*other);
  bool any_differs = false;
  for (const auto& [name, p] : a) {
    EXPECT_TRUE(p.equal(b[name])) << name;
    any_differs = any_differs || !p.equal(c[name]);
  }
  EXPECT_TRUE(any_differs);
}

TEST_P(ImageModelShape, NullClassIsTheUnconditionalBranch) {
  auto model = fixture_model(GetParam());
  at::NoGradGuard no_grad;
  auto x = at::randn({2, 1, 8, 8}), time = at::tensor({10.0f, 500.0f});
  auto null = model->forward(x, time, at::tensor({10, 10}));
  EXPECT_TRUE(at::isfinite(null).all().item<bool>());
  EXPECT_TRUE(model->forward(x, time, at::Tensor()).equal(null));  // no labels = every image unconditional
  EXPECT_GT(max_abs(model->forward(x, time, at::tensor({2, 2})) - null), 1e-3);
  EXPECT_TRUE(model->forward(x, at::scalar_tensor(10.0), at::tensor({10, 10})).narrow(0, 0, 1).equal(null.narrow(0, 0, 1)));
}

TEST_P(ImageModelShape, BFloat16ComputeFollowsFloat32) {
  auto config = fixture_config(GetParam());
  auto model = fixture_model(GetParam());
  config.dtype = "bfloat16";
  auto low = make_image_model(config, dew::nn::ParameterInit::none);
  dew::nn::load_parameters(*low, dew::formats::SafetensorsFile(fixture_dir() / (GetParam() + ".safetensors")));
  at::NoGradGuard no_grad;
  dew::formats::SafetensorsFile io(fixture_dir() / (GetParam() + "_io.safetensors"));
  auto reference = model->forward(io.load("x"), io.load("time"), io.load("labels"));
  auto out = low->forward(io.load("x"), io.load("time"), io.load("labels"));
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  // bfloat16 keeps 8 significant bits (relative rounding 2^-9 = 2e-3) at each of the ~16-30 stages above;
  // errors of random sign grow like sqrt(stages): 6 * 2e-3 = 1.2e-2, so 5e-2 leaves room and still fails a
  // wrong dtype path (which is off by O(1)).
  EXPECT_LT(relative_error(out, reference), 5e-2);
}

INSTANTIATE_TEST_SUITE_P(Models, ImageModelShape, ::testing::Values("dit", "unet"));

TEST(DiT, SinCosPositionsMatchDiT) {
  dew::formats::SafetensorsFile io(fixture_dir() / "dit_io.safetensors");
  auto table = dew::nn::sincos_positions_2d(32, 4);
  // Each value is one sine or cosine of a float64 angle, rounded to float32: within one float32 ulp.
  EXPECT_LT(max_abs(table - io.load("pos_table")), 1.2e-7);
  auto config = fixture_config("dit");
  config.positions = "sincos";
  auto fixed = std::make_shared<dew::nn::diffusion::DiTImpl>(config);
  EXPECT_FALSE(dew::nn::parameter_map(*fixed).count("pos_embed"));  // a buffer: checkpoints omit it
  EXPECT_TRUE(fixed->pos_embed.equal(table.unsqueeze(0)));
  auto learned = make_image_model(fixture_config("dit"));
  EXPECT_TRUE(dew::nn::parameter_map(*learned)["pos_embed"].equal(table.unsqueeze(0)));
  EXPECT_EQ(dew::nn::diffusion::parameter_count(config), summary()["dit"]["parameter_count"].get<std::int64_t>() - 16 * 32);
}

TEST(ImageModel, CountsFromTheConfigEqualTheBuiltModel) {
  std::vector<ImageModelConfig> configs(6);
  configs[1].positions = "learned";
  configs[2].num_classes = 0;
  configs[3].kind = "unet";
  configs[4].kind = "unet";
  configs[4].num_classes = 0;
  configs[4].image_size = 32;
  configs[4].channels = 3;
  configs[4].channel_mult = {1, 2, 3, 4};
  configs[4].res_blocks = 1;
  configs[4].attention_resolutions = {16, 4};
  configs[4].base_channels = 32;
  configs[5].kind = "unet";
  configs[5].channel_mult = {1};
  configs[5].attention_resolutions = {};
  for (const auto& config : configs) {
    auto model = make_image_model(config, dew::nn::ParameterInit::none);
    EXPECT_EQ(model->parameter_count(), dew::nn::diffusion::parameter_count(config)) << config.kind;
    auto out = model->forward(at::zeros({1, config.channels, config.image_size, config.image_size}), at::scalar_tensor(1.0), at::Tensor());
    EXPECT_EQ(out.size(2), config.image_size);
  }
  // The default DiT (28x28, patch 2, dim 256, depth 6) by hand: 196 tokens.
  const double N = 196, D = 256, block = 2 * D * 6 * D + 2 * N * D * 3 * D + 4 * N * N * D + 2 * N * D * D + 2 * 2 * N * D * 4 * D;
  const double dit = 2 * N * D * 4 + 2 * (256 * D + D * D) + 6 * block + 2 * D * 2 * D + 2 * N * D * 4;
  EXPECT_EQ(dew::nn::diffusion::image_model_flops(configs[0]), dit);
}

TEST(ImageModel, BadSizesAreRefusedByField) {
  auto refused = [](auto change) {
    ImageModelConfig config;
    change(config);
    return dew::test::error_of([&] { make_image_model(config); });
  };
  EXPECT_NE(refused([](auto& c) { c.patch_size = 3; }).find("model.patch_size (3) does not divide model.image_size (28)"), std::string::npos);
  EXPECT_NE(refused([](auto& c) { c.heads = 5; }).find("model.dim (256) is not divisible by model.heads (5)"), std::string::npos);
  EXPECT_NE(refused([](auto& c) { c.dim = 18, c.heads = 3; }).find("model.dim (18) must be a multiple of 4"), std::string::npos);
  EXPECT_NE(refused([](auto& c) { c.positions = "rope"; }).find("model.positions is 'rope'"), std::string::npos);
  EXPECT_NE(refused([](auto& c) { c.kind = "vit"; }).find("model.kind is 'vit'; use dit or unet"), std::string::npos);
  EXPECT_NE(refused([](auto& c) { c.mlp_ratio = std::nan(""); }).find("model.mlp_ratio"), std::string::npos);
  EXPECT_NE(refused([](auto& c) { c.num_classes = -1; }).find("model.num_classes must be >= 0"), std::string::npos);
  EXPECT_NE(refused([](auto& c) { c.dtype = "float64"; }).find("model.dtype is 'float64'"), std::string::npos);
  auto unet = [&](auto change) {
    return refused([&](auto& c) {
      c.kind = "unet";
      change(c);
    });
  };
  EXPECT_EQ(unet([](auto&) {}), "(no error)");
  EXPECT_NE(unet([](auto& c) { c.groups = 24; }).find("model.groups (24) does not divide 64 channels"), std::string::npos);
  EXPECT_NE(unet([](auto& c) { c.image_size = 30; }).find("model.image_size (30) is not divisible by 4"), std::string::npos);
  EXPECT_NE(unet([](auto& c) { c.attention_resolutions = {8}; }).find("model.attention_resolutions holds 8, which is no feature-map size of this net; its levels are [28, 14, 7]"),
            std::string::npos);
  EXPECT_NE(unet([](auto& c) { c.head_channels = 48; }).find("model.head_channels (48) does not divide the 128 channels"), std::string::npos);
  EXPECT_NE(unet([](auto& c) { c.channel_mult = {}; }).find("model.channel_mult is empty"), std::string::npos);
  EXPECT_NE(unet([](auto& c) { c.channel_mult = {1, 0}; }).find("model.channel_mult [1, 0] holds 0"), std::string::npos);
  EXPECT_NE(unet([](auto& c) { c.dropout = 1.0; }).find("model.dropout must be in [0, 1)"), std::string::npos);
  // A DiT field out of range does not matter to a UNet, and the other way round.
  EXPECT_EQ(unet([](auto& c) { c.patch_size = 3; }), "(no error)");
  EXPECT_EQ(refused([](auto& c) { c.groups = 5; }), "(no error)");
}

TEST(ImageModel, BadInputsAreRefusedWithWhatTheModelTakes) {
  auto model = fixture_model("dit");
  auto error = [&](const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) {
    return dew::test::error_of([&] { model->forward(x, time, labels); });
  };
  auto x = at::zeros({2, 1, 8, 8});
  EXPECT_NE(error(at::zeros({2, 1, 28, 28}), at::zeros({2}), at::Tensor()).find("takes images [batch, 1, 8, 8]"), std::string::npos);
  EXPECT_NE(error(x, at::zeros({3}), at::Tensor()).find("one time per image ([2] or a scalar)"), std::string::npos);
  EXPECT_NE(error(x, at::zeros({2}), at::tensor({0, 11})).find("class label 11 is outside [0, 10]"), std::string::npos);
  EXPECT_NE(error(x, at::zeros({2}), at::tensor({-1, 1})).find("class label -1"), std::string::npos);
  EXPECT_NE(error(x, at::zeros({2}), at::zeros({2, 1}, at::kLong)).find("one label per image"), std::string::npos);
  EXPECT_EQ(error(x, at::zeros({2}), at::tensor({0, 10})), "(no error)");
}

// The sizes docs/diffusion_models.md quotes, pinned; the CIFAR-10 UNet of DDPM (Ho et al. 2020: 128 channels,
// multipliers 1, 2, 2, 2, attention at 16x16, 2 blocks per level) has the published 35.7M parameters.
TEST(ImageModel, DefaultAndPublishedSizes) {
  using dew::nn::diffusion::image_model_flops;
  using dew::nn::diffusion::parameter_count;
  ImageModelConfig dit, unet, ddpm;
  unet.kind = "unet";
  EXPECT_EQ(parameter_count(dit), 7369220);
  EXPECT_EQ(image_model_flops(dit), 2091761664.0);
  EXPECT_EQ(parameter_count(unet), 6472705);
  EXPECT_EQ(image_model_flops(unet), 2208406528.0);
  ddpm.kind = "unet";
  ddpm.image_size = 32;
  ddpm.channels = 3;
  ddpm.num_classes = 0;
  ddpm.base_channels = 128;
  ddpm.channel_mult = {1, 2, 2, 2};
  ddpm.attention_resolutions = {16};
  ddpm.head_channels = 256;  // DDPM's attention has one head (the count does not depend on heads)
  EXPECT_NEAR(static_cast<double>(parameter_count(ddpm)), 35.7e6, 0.05e6);
}

}  // namespace
