#include "dew/nn/diffusion/image_model.h"

#include "dew/core/error.h"
#include "dew/nn/diffusion/dit.h"
#include "dew/nn/diffusion/unet.h"
#include "dew/nn/dtype.h"

namespace dew::nn::diffusion {

std::int64_t ImageModelImpl::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

ImageModelImpl::Inputs ImageModelImpl::prepare(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) const {
  const auto& c = config();
  if (!x.defined() || x.dim() != 4 || x.size(1) != c.channels || x.size(2) != c.image_size || x.size(3) != c.image_size) {
    dew::fail("the ", c.kind, " model takes images [batch, ", c.channels, ", ", c.image_size, ", ", c.image_size,
              "] (model.channels, model.image_size), got ", x.defined() ? dew::str(x.sizes()) : std::string("no tensor"));
  }
  if (!x.is_floating_point()) dew::fail("the ", c.kind, " model takes float images, got ", x.scalar_type());
  const auto B = x.size(0);
  Inputs in;
  in.x = x.to(parse_dtype(c.dtype));
  if (!time.defined() || !(time.dim() == 0 || (time.dim() == 1 && time.size(0) == B))) {
    dew::fail("the ", c.kind, " model takes one time per image ([", B, "] or a scalar), got ",
              time.defined() ? dew::str(time.sizes()) : std::string("no tensor"));
  }
  in.time = (time.dim() == 0 ? time.expand({B}) : time).to(x.device());
  if (c.num_classes == 0 || !labels.defined()) {
    if (c.num_classes > 0) in.labels = at::full({B}, c.num_classes, at::TensorOptions().dtype(at::kLong).device(x.device()));
    return in;
  }
  if (labels.dim() != 1 || labels.size(0) != B) {
    dew::fail("the ", c.kind, " model takes one label per image ([", B, "]), got ", labels.sizes());
  }
  if (labels.is_floating_point() || labels.scalar_type() == at::kBool) dew::fail("class labels must be integers, got ", labels.scalar_type());
  in.labels = labels.to(at::kLong).to(x.device());
  // A range check costs a device sync on a GPU, so only CPU tensors get it here (an embedding lookup there
  // would fail with LibTorch's message); the data layer checks labels against num_classes as it reads them.
  if (in.labels.is_cpu() && B > 0) {
    auto low = in.labels.min().item<std::int64_t>(), high = in.labels.max().item<std::int64_t>();
    if (low < 0 || high > c.num_classes) {
      dew::fail("class label ", low < 0 ? low : high, " is outside [0, ", c.num_classes, "] (model.num_classes = ", c.num_classes,
                "; ", c.num_classes, " is the \"no label\" class)");
    }
  }
  return in;
}

std::shared_ptr<ImageModelImpl> make_image_model(const ImageModelConfig& config, ParameterInit init) {
  config.validate();
  std::shared_ptr<ImageModelImpl> model;
  if (config.kind == "dit") model = std::make_shared<DiTImpl>(config);
  if (config.kind == "unet") model = std::make_shared<UNetImpl>(config);
  if (init == ParameterInit::seeded) model->init_parameters(0);
  return model;
}

}  // namespace dew::nn::diffusion
