#include "dew/nn/diffusion/image_model_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dew/core/error.h"

namespace dew::nn::diffusion {

namespace {

void positive(std::int64_t value, const char* field) {
  if (value <= 0) dew::fail("model.", field, " must be positive, got ", value);
}

std::string list(const std::vector<std::int64_t>& values) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

void validate_dit(const ImageModelConfig& c) {
  positive(c.patch_size, "patch_size");
  positive(c.dim, "dim");
  positive(c.depth, "depth");
  positive(c.heads, "heads");
  if (c.image_size % c.patch_size != 0) {
    dew::fail("model.patch_size (", c.patch_size, ") does not divide model.image_size (", c.image_size,
              "); use a patch size that divides it (e.g. 2 or 4 for 28)");
  }
  if (c.dim % c.heads != 0) {
    dew::fail("model.dim (", c.dim, ") is not divisible by model.heads (", c.heads, "); change one of them");
  }
  // Written as !(x > 0) so that NaN, for which every comparison is false, is refused too.
  if (!(c.mlp_ratio > 0) || std::isinf(c.mlp_ratio) || c.dit_mlp_features() < 1) {
    dew::fail("model.mlp_ratio must be finite and give an MLP of at least one feature (dim * mlp_ratio >= 1), got ", c.mlp_ratio);
  }
  if (c.positions != "sincos" && c.positions != "learned") {
    dew::fail("model.positions is '", c.positions, "'; use sincos or learned");
  }
  // The 2-D table gives each axis half the features, each half split into sines and cosines.
  if (c.dim % 4 != 0) {
    dew::fail("model.dim (", c.dim, ") must be a multiple of 4: the 2-D sin-cos positions split it in four; use e.g. ", (c.dim / 4 + 1) * 4);
  }
}

void validate_unet(const ImageModelConfig& c) {
  positive(c.base_channels, "base_channels");
  positive(c.res_blocks, "res_blocks");
  positive(c.groups, "groups");
  positive(c.head_channels, "head_channels");
  if (c.channel_mult.empty()) dew::fail("model.channel_mult is empty; give one multiplier per level, e.g. [1, 2, 2]");
  for (auto m : c.channel_mult) {
    if (m <= 0) dew::fail("model.channel_mult ", list(c.channel_mult), " holds ", m, "; every multiplier must be positive");
    if ((c.base_channels * m) % c.groups != 0) {
      dew::fail("model.groups (", c.groups, ") does not divide ", c.base_channels * m, " channels (model.base_channels ",
                c.base_channels, " x model.channel_mult ", m, "); use groups that divide every level's channels");
    }
  }
  const auto levels = static_cast<std::int64_t>(c.channel_mult.size());
  const std::int64_t divisor = std::int64_t{1} << (levels - 1);
  if (levels > 1 && c.image_size % divisor != 0) {
    dew::fail("model.image_size (", c.image_size, ") is not divisible by ", divisor, ": the ", levels,
              " levels of model.channel_mult halve it ", levels - 1, " times; use a size divisible by ", divisor,
              " or fewer levels");
  }
  auto sizes = c.unet_resolutions();
  for (auto r : c.attention_resolutions) {
    auto level = std::find(sizes.begin(), sizes.end(), r);
    if (level == sizes.end()) {
      dew::fail("model.attention_resolutions holds ", r, ", which is no feature-map size of this net; its levels are ",
                list(sizes), " (model.image_size ", c.image_size, " halved per level of model.channel_mult)");
    }
    const auto channels = c.base_channels * c.channel_mult[static_cast<std::size_t>(level - sizes.begin())];
    if (channels % c.head_channels != 0) {
      dew::fail("model.head_channels (", c.head_channels, ") does not divide the ", channels, " channels of the ", r, "x", r,
                " level that model.attention_resolutions puts attention at; use a divisor of ", channels);
    }
  }
  const auto mid = c.base_channels * c.channel_mult.back();  // the middle block always attends
  if (mid % c.head_channels != 0) {
    dew::fail("model.head_channels (", c.head_channels, ") does not divide the ", mid,
              " channels of the middle block (which always has attention); use a divisor of ", mid);
  }
  if (!(c.dropout >= 0) || !(c.dropout < 1)) dew::fail("model.dropout must be in [0, 1), got ", c.dropout);
}

}  // namespace

std::vector<std::int64_t> ImageModelConfig::unet_resolutions() const {
  std::vector<std::int64_t> sizes;
  std::int64_t size = image_size;
  for (std::size_t i = 0; i < channel_mult.size(); ++i, size /= 2) sizes.push_back(size);
  return sizes;
}

void ImageModelConfig::validate() const {
  positive(image_size, "image_size");
  positive(channels, "channels");
  if (num_classes < 0) dew::fail("model.num_classes must be >= 0 (0 = unconditional), got ", num_classes);
  if (dtype != "float32" && dtype != "bfloat16" && dtype != "float16") {
    dew::fail("model.dtype is '", dtype, "'; use float32, bfloat16 or float16");
  }
  if (kind == "dit") {
    validate_dit(*this);
  } else if (kind == "unet") {
    validate_unet(*this);
  } else {
    dew::fail("model.kind is '", kind, "'; use dit or unet");
  }
}

}  // namespace dew::nn::diffusion
