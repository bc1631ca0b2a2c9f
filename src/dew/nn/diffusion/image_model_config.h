#pragma once
// The configuration of an image diffusion network (the "model" section of a diffusion run): which
// architecture (kind), the image it reads, the class conditioning, and each kind's sizes. One struct for
// both kinds, so `--set model.kind=unet` switches architecture without another section; validate() checks
// only the fields of the chosen kind.
#include <cstdint>
#include <string>
#include <vector>

namespace dew::nn::diffusion {

struct ImageModelConfig {
  std::string kind = "dit";                 // dit | unet
  std::int64_t image_size = 28;             // input [B, channels, image_size, image_size]
  std::int64_t channels = 1;
  std::int64_t num_classes = 10;            // 0 = unconditional; label == num_classes is the "no label" (CFG) class
  std::string dtype = "float32";            // compute dtype; parameters stay float32
  // dit (Peebles & Xie 2023; the spec's SimpleDiT(patch_size, emb_features, num_layers, num_heads))
  std::int64_t patch_size = 2;
  std::int64_t dim = 256;
  std::int64_t depth = 6;
  std::int64_t heads = 4;
  double mlp_ratio = 4.0;
  std::string positions = "sincos";         // sincos (fixed 2-D) | learned
  // unet (DDPM / ADM; the block layout and names of diffusers' UNet2DModel)
  std::int64_t base_channels = 64;
  std::vector<std::int64_t> channel_mult = {1, 2, 2};
  std::int64_t res_blocks = 2;
  std::vector<std::int64_t> attention_resolutions = {7};  // feature-map sizes that get self-attention
  std::int64_t head_channels = 32;          // channels per attention head (diffusers' attention_head_dim)
  std::int64_t groups = 32;
  double dropout = 0.0;

  template <class V>
  void fields(V& v) {
    v("kind", kind, "network: dit or unet");
    v("image_size", image_size, "height and width of the (square) images the model reads");
    v("channels", channels, "image channels (1 grey, 3 RGB)");
    v("num_classes", num_classes, "classes for conditioning (label num_classes = no label, for guidance); 0 = unconditional");
    v("dtype", dtype, "compute dtype: float32, bfloat16 or float16 (parameters stay float32)");
    v("patch_size", patch_size, "dit: pixels per patch side; must divide image_size");
    v("dim", dim, "dit: width of the token stream (the spec's emb_features)");
    v("depth", depth, "dit: transformer blocks (the spec's num_layers)");
    v("heads", heads, "dit: attention heads; must divide dim");
    v("mlp_ratio", mlp_ratio, "dit: MLP hidden width / dim");
    v("positions", positions, "dit: sincos (fixed 2-D sin-cos table) or learned (a parameter, started at the sin-cos table)");
    v("base_channels", base_channels, "unet: channels of the first level");
    v("channel_mult", channel_mult, "unet: channels of each level as multiples of base_channels; each level after the first halves the size");
    v("res_blocks", res_blocks, "unet: residual blocks per level on the way down (one more on the way up)");
    v("attention_resolutions", attention_resolutions, "unet: feature-map sizes (e.g. 7 for a 28 -> 14 -> 7 net) that get self-attention");
    v("head_channels", head_channels, "unet: channels per attention head");
    v("groups", groups, "unet: GroupNorm groups; must divide every level's channels");
    v("dropout", dropout, "unet: dropout in the residual blocks while training");
  }

  // Refuses bad sizes naming model.<field> and the value (and what to change).
  void validate() const;

  // dit: patches per side and tokens; unet: the feature-map size of each level (image_size halved per level).
  std::int64_t dit_grid() const { return image_size / patch_size; }
  std::int64_t dit_mlp_features() const { return static_cast<std::int64_t>(static_cast<double>(dim) * mlp_ratio); }
  std::vector<std::int64_t> unet_resolutions() const;
  std::int64_t unet_time_features() const { return 4 * base_channels; }  // the time (+ class) embedding width
};

}  // namespace dew::nn::diffusion
