#include "dew/processes/noise_process.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "dew/core/error.h"

namespace dew::processes {

namespace {

// The dtype every process computes in: float64 stays float64 (solvers that want the precision), anything
// else (float32, half, integer timesteps) becomes float32.
at::Tensor as_real(const at::Tensor& t) { return t.scalar_type() == at::kDouble ? t : t.to(at::kFloat); }

// diffusers' betas_for_alpha_bar(T, max_beta=0.999, "cosine") (Nichol & Dhariwal 2021), computed in
// Python floats (double) and stored as float32, as diffusers does.
at::Tensor cosine_betas(std::int64_t steps) {
  auto alpha_bar = [](double t) {
    const double c = std::cos((t + 0.008) / 1.008 * std::numbers::pi / 2);
    return c * c;
  };
  std::vector<double> betas;
  for (std::int64_t i = 0; i < steps; ++i) {
    const double t1 = static_cast<double>(i) / static_cast<double>(steps);
    const double t2 = static_cast<double>(i + 1) / static_cast<double>(steps);
    betas.push_back(std::min(1 - alpha_bar(t2) / alpha_bar(t1), 0.999));
  }
  return at::tensor(betas, at::kDouble).to(at::kFloat);
}

}  // namespace

ProcessKind parse_process(const std::string& name) {
  if (name == "vp") return ProcessKind::vp;
  if (name == "edm") return ProcessKind::edm;
  if (name == "flow") return ProcessKind::flow;
  fail("diffusion.process = \"", name, "\" is not a noise process; use vp (DDPM), edm (Karras) or flow (rectified flow)");
}

std::string to_string(ProcessKind kind) {
  switch (kind) {
    case ProcessKind::vp: return "vp";
    case ProcessKind::edm: return "edm";
    case ProcessKind::flow: return "flow";
  }
  return "?";
}

void NoiseProcessConfig::validate() const {
  const ProcessKind kind = parse_process(process);
  if (schedule != "linear" && schedule != "cosine") {
    fail("diffusion.schedule = \"", schedule, "\" is not a vp beta schedule; use linear or cosine");
  }
  if (kind == ProcessKind::vp) {
    if (train_steps < 2) fail("diffusion.train_steps = ", train_steps, " is too small; a vp schedule needs at least 2 timesteps (1000 is usual)");
    if (schedule == "linear") {
      if (!(beta_start > 0 && beta_start < 1)) fail("diffusion.beta_start = ", beta_start, " must be in (0, 1) (1e-4 is usual)");
      if (!(beta_end >= beta_start && beta_end < 1)) {
        fail("diffusion.beta_end = ", beta_end, " must be in [beta_start, 1) (beta_start = ", beta_start, "; 0.02 is usual)");
      }
    }
  }
  if (kind == ProcessKind::edm) {
    if (!(sigma_min > 0)) fail("diffusion.sigma_min = ", sigma_min, " must be positive (0.002 is usual)");
    if (!(sigma_max > sigma_min)) fail("diffusion.sigma_max = ", sigma_max, " must be larger than sigma_min = ", sigma_min, " (80 is usual)");
    if (!(rho > 0)) fail("diffusion.rho = ", rho, " must be positive (7 is usual)");
  }
  if (!(sigma_data > 0)) fail("diffusion.sigma_data = ", sigma_data, " must be positive (0.5 for images in [-1, 1])");
  if (!(flow_shift > 0) || !std::isfinite(flow_shift)) fail("diffusion.flow_shift = ", flow_shift, " must be a positive number (1 = no shift)");
}

NoiseProcess::NoiseProcess(NoiseProcessConfig config) : config_(std::move(config)) {
  config_.validate();
  kind_ = parse_process(config_.process);
  if (kind_ != ProcessKind::vp) return;
  // float32 betas and a float32 cumprod, as diffusers builds them: the table is bit-for-bit diffusers'.
  const at::Tensor betas = config_.schedule == "linear"
                               ? at::linspace(config_.beta_start, config_.beta_end, config_.train_steps, at::kFloat)
                               : cosine_betas(config_.train_steps);
  alphas_cumprod_ = at::cumprod(1.0 - betas, 0).to(at::kDouble);
  log_sigmas_ = (0.5 * ((1.0 - alphas_cumprod_) / alphas_cumprod_).log()).contiguous();
}

at::Tensor NoiseProcess::vp_log_karras_sigma(const at::Tensor& t) const {
  const std::int64_t T = config_.train_steps;
  const auto td = t.to(at::kDouble).clamp(0, static_cast<double>(T - 1));
  const auto low = td.floor();
  const auto w = td - low;
  const auto low_i = low.to(at::kLong), high_i = (low_i + 1).clamp_max(T - 1);
  const auto table = log_sigmas_.to(t.device());
  return at::where(w == 0, table.take(low_i), (1 - w) * table.take(low_i) + w * table.take(high_i));
}

std::pair<at::Tensor, at::Tensor> NoiseProcess::alpha_sigma(const at::Tensor& t_in) const {
  const auto t = as_real(t_in);
  switch (kind_) {
    case ProcessKind::vp: {
      const std::int64_t T = config_.train_steps;
      const auto td = t.to(at::kDouble).clamp(0, static_cast<double>(T - 1));
      const auto integer = td == td.floor();
      // Integer t reads the table directly (what diffusers' add_noise uses); fractional t goes through
      // the interpolated log sigma/alpha.
      const auto abar = alphas_cumprod_.to(t.device()).take(td.floor().to(at::kLong));
      const auto s = vp_log_karras_sigma(td).exp();
      const auto alpha_frac = (1 + s * s).rsqrt();
      const auto alpha = at::where(integer, abar.sqrt(), alpha_frac);
      const auto sigma = at::where(integer, (1 - abar).sqrt(), s * alpha_frac);
      return {alpha.to(t.scalar_type()), sigma.to(t.scalar_type())};
    }
    case ProcessKind::edm:
      return {at::ones_like(t), t.clone()};
    case ProcessKind::flow:
      return {1 - t, t.clone()};
  }
  fail("NoiseProcess: unknown process");
}

at::Tensor NoiseProcess::add_noise(const at::Tensor& x0, const at::Tensor& eps, const at::Tensor& t) const {
  if (x0.sizes() != eps.sizes()) fail("add_noise: x0 has shape ", x0.sizes(), " but eps has ", eps.sizes());
  if (t.dim() != 1 || t.size(0) != x0.size(0)) fail("add_noise: t must be [B] with B = ", x0.size(0), ", got shape ", t.sizes());
  auto [alpha, sigma] = alpha_sigma(t);
  alpha = broadcast_over(alpha.to(x0.scalar_type()), x0.dim());
  sigma = broadcast_over(sigma.to(x0.scalar_type()), x0.dim());
  return alpha * x0 + sigma * eps;
}

at::Tensor NoiseProcess::model_time(const at::Tensor& t) const {
  const auto tf = t.to(at::kFloat);
  switch (kind_) {
    case ProcessKind::vp: return tf;
    case ProcessKind::edm: return tf.log() / 4;  // EDM's c_noise = ln(sigma) / 4
    case ProcessKind::flow: return tf * 1000;
  }
  fail("NoiseProcess: unknown process");
}

at::Tensor NoiseProcess::karras_sigma(const at::Tensor& t_in) const {
  const auto t = as_real(t_in);
  switch (kind_) {
    case ProcessKind::vp: return vp_log_karras_sigma(t).exp().to(t.scalar_type());
    case ProcessKind::edm: return t.clone();
    case ProcessKind::flow: return t / (1 - t);
  }
  fail("NoiseProcess: unknown process");
}

at::Tensor NoiseProcess::time_from_karras_sigma(const at::Tensor& s_in) const {
  const auto s = as_real(s_in);
  switch (kind_) {
    case ProcessKind::vp: {
      // k-diffusion's DiscreteSchedule.sigma_to_t: the bracketing table entries, linear in log sigma.
      const std::int64_t T = config_.train_steps;
      const auto table = log_sigmas_.to(s.device());
      const auto log_s = s.to(at::kDouble).log();
      const auto low_i = (at::searchsorted(table, log_s.contiguous(), /*out_int32=*/false, /*right=*/true) - 1).clamp(0, T - 2);
      const auto high_i = low_i + 1;
      const auto low = table.take(low_i), high = table.take(high_i);
      const auto w = ((low - log_s) / (low - high)).clamp(0, 1);
      return ((1 - w) * low_i.to(at::kDouble) + w * high_i.to(at::kDouble)).to(s.scalar_type());
    }
    case ProcessKind::edm: return s.clone();
    case ProcessKind::flow: return at::where(s.isinf(), at::ones_like(s), s / (1 + s));
  }
  fail("NoiseProcess: unknown process");
}

at::Tensor NoiseProcess::shift_time(const at::Tensor& t_in) const {
  const auto t = as_real(t_in);
  const double shift = config_.flow_shift;
  if (kind_ != ProcessKind::flow || shift == 1.0) return t;
  return shift * t / (1 + (shift - 1) * t);
}

double NoiseProcess::t_max() const {
  switch (kind_) {
    case ProcessKind::vp: return static_cast<double>(config_.train_steps - 1);
    case ProcessKind::edm: return config_.sigma_max;
    case ProcessKind::flow: return 1.0;
  }
  return 0;
}

double NoiseProcess::t_min() const {
  switch (kind_) {
    case ProcessKind::vp: return 0.0;
    case ProcessKind::edm: return config_.sigma_min;
    case ProcessKind::flow: return 0.0;
  }
  return 0;
}

}  // namespace dew::processes
