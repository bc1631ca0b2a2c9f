#pragma once
// The image diffusion networks behind one interface, and the table that builds them by kind.
//
//   auto model = dew::nn::diffusion::make_image_model(config);        // "dit" or "unet", seed-0 weights
//   auto out = model->forward(x_t, process.model_time(t), labels);     // [B, C, H, W], what the objective predicts
//
// Both take a noisy image, the noise process's time as the network should see it (a float per image) and
// a class label per image (num_classes = "no label": classifier-free guidance's unconditional branch),
// and return a tensor shaped like the image. Parameters are float32 and named as the reference code names
// them (DiT: facebookresearch/DiT; UNet: diffusers' UNet2DModel); those names are the safetensors names
// checkpoints hold.
#include <torch/nn/module.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>

#include "dew/nn/causal_transformer.h"  // ParameterInit
#include "dew/nn/diffusion/image_model_config.h"
#include "dew/nn/diffusion/image_model_size.h"  // parameter_count(config), image_model_flops(config)

namespace dew::nn::diffusion {

class ImageModelImpl : public torch::nn::Module {
 public:
  ~ImageModelImpl() override = default;
  // x: [B, C, H, W] float; time: [B] (or a scalar for all) float, the process's model_time; labels: [B] int64
  // in [0, num_classes] (num_classes = dropped / unconditional; undefined = all unconditional; ignored when
  // num_classes is 0). Computes in config().dtype, returns float32 [B, C, H, W].
  virtual at::Tensor forward(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) = 0;
  // Deterministic from the seed and independent of device (draws in float32 on the CPU, in sorted name
  // order). The layers whose output starts a residual branch or the model's output are zero, so a fresh
  // model returns exactly zeros (DiT's adaLN-Zero; ADM's zero_module in the UNet).
  virtual void init_parameters(std::uint64_t seed) = 0;
  virtual const ImageModelConfig& config() const = 0;
  std::int64_t parameter_count() const;  // elements of parameters() (the same as parameter_count(config()))

 protected:
  struct Inputs {
    at::Tensor x, time, labels;  // x in the compute dtype; time float [B]; labels int64 [B] (undefined: none)
  };
  // Checks shapes against the config (errors name the tensor, its shape and what the model takes) and
  // brings the inputs to the forms above.
  Inputs prepare(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) const;
};

// The model table: config.kind -> a new model (config validated). With ParameterInit::none the weights are
// left uninitialised for a caller about to load them.
std::shared_ptr<ImageModelImpl> make_image_model(const ImageModelConfig& config, ParameterInit init = ParameterInit::seeded);

}  // namespace dew::nn::diffusion
