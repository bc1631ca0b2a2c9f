#include "dew/nn/diffusion/image_model_size.h"

#include <algorithm>

#include "dew/nn/diffusion/dit.h"

namespace dew::nn::diffusion {

namespace {

// Parameters and forward FLOPs per image, accumulated layer by layer in the order the models build them.
struct Tally {
  double params = 0, flops = 0;
  void linear(double in, double out, double rows = 1) {  // rows: positions the layer is applied at, per image
    params += in * out + out;
    flops += 2 * rows * in * out;
  }
  void conv(double in, double out, double kernel, double output_size) {
    params += in * out * kernel * kernel + out;
    flops += 2 * output_size * output_size * out * in * kernel * kernel;
  }
  void attention(double tokens, double width) { flops += 4 * tokens * tokens * width; }  // q k^T and p v
  void group_norm(double channels) { params += 2 * channels; }
};

Tally dit(const ImageModelConfig& c) {
  Tally t;
  const double D = static_cast<double>(c.dim), grid = static_cast<double>(c.dit_grid());
  const double N = grid * grid, patch_values = static_cast<double>(c.patch_size * c.patch_size * c.channels);
  t.conv(static_cast<double>(c.channels), D, static_cast<double>(c.patch_size), grid);
  if (c.positions == "learned") t.params += N * D;
  t.linear(static_cast<double>(kDiTFrequencyFeatures), D);
  t.linear(D, D);
  if (c.num_classes > 0) t.params += static_cast<double>(c.num_classes + 1) * D;
  for (std::int64_t i = 0; i < c.depth; ++i) {
    t.linear(D, 6 * D);  // adaLN modulation, once per image
    t.linear(D, 3 * D, N);
    t.attention(N, D);
    t.linear(D, D, N);
    t.linear(D, static_cast<double>(c.dit_mlp_features()), N);
    t.linear(static_cast<double>(c.dit_mlp_features()), D, N);
  }
  t.linear(D, 2 * D);
  t.linear(D, patch_values, N);
  return t;
}

Tally unet(const ImageModelConfig& c) {
  Tally t;
  const auto levels = static_cast<std::int64_t>(c.channel_mult.size());
  const double T = static_cast<double>(c.unet_time_features());
  const auto sizes = c.unet_resolutions();
  auto channels = [&](std::int64_t level) { return static_cast<double>(c.base_channels * c.channel_mult[static_cast<std::size_t>(level)]); };
  auto size = [&](std::int64_t level) { return static_cast<double>(sizes[static_cast<std::size_t>(level)]); };
  auto attends = [&](std::int64_t level) {
    return std::find(c.attention_resolutions.begin(), c.attention_resolutions.end(), sizes[static_cast<std::size_t>(level)]) !=
           c.attention_resolutions.end();
  };
  auto resnet = [&](double in, double out, double s) {
    t.group_norm(in);
    t.conv(in, out, 3, s);
    t.linear(T, out);
    t.group_norm(out);
    t.conv(out, out, 3, s);
    if (in != out) t.conv(in, out, 1, s);
  };
  auto attention = [&](double ch, double s) {
    t.group_norm(ch);
    for (int i = 0; i < 4; ++i) t.linear(ch, ch, s * s);  // to_q, to_k, to_v, to_out.0
    t.attention(s * s, ch);
  };

  t.conv(static_cast<double>(c.channels), channels(0), 3, size(0));
  t.linear(static_cast<double>(c.base_channels), T);
  t.linear(T, T);
  if (c.num_classes > 0) t.params += static_cast<double>(c.num_classes + 1) * T;
  double in = channels(0);
  for (std::int64_t level = 0; level < levels; ++level) {
    const double out = channels(level), s = size(level);
    for (std::int64_t j = 0; j < c.res_blocks; ++j) {
      resnet(j == 0 ? in : out, out, s);
      if (attends(level)) attention(out, s);
    }
    if (level != levels - 1) t.conv(out, out, 3, size(level + 1));
    in = out;
  }
  const double deepest = channels(levels - 1), s_deep = size(levels - 1);
  resnet(deepest, deepest, s_deep);
  attention(deepest, s_deep);
  resnet(deepest, deepest, s_deep);
  double previous = deepest;
  for (std::int64_t i = 0; i < levels; ++i) {
    const auto level = levels - 1 - i;
    const double out = channels(level), before = channels(std::max<std::int64_t>(level - 1, 0)), s = size(level);
    for (std::int64_t j = 0; j <= c.res_blocks; ++j) {
      resnet((j == 0 ? previous : out) + (j == c.res_blocks ? before : out), out, s);
      if (attends(level)) attention(out, s);
    }
    if (i != levels - 1) t.conv(out, out, 3, 2 * s);
    previous = out;
  }
  t.group_norm(channels(0));
  t.conv(channels(0), static_cast<double>(c.channels), 3, size(0));
  return t;
}

Tally tally(const ImageModelConfig& config) {
  config.validate();
  return config.kind == "dit" ? dit(config) : unet(config);
}

}  // namespace

std::int64_t parameter_count(const ImageModelConfig& config) { return static_cast<std::int64_t>(tally(config).params); }

double image_model_flops(const ImageModelConfig& config) { return tally(config).flops; }

}  // namespace dew::nn::diffusion
