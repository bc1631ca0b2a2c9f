#pragma once
// Diffusion solvers: the table of samplers by name and `sample`, which runs one from x_T to x0.
//
// A solver sees the model only through a Denoiser: given x_t (in the process's own space, x_t = alpha x0 +
// sigma eps) and the time t, it returns the model's (x0, eps). The caller applies the network, classifier-
// free guidance (guidance.h) and from_prediction there, so every solver works with every prediction target.
//
// The table (one small file per solver under solvers/):
//   ddpm             ancestral DDPM posterior steps                     (DDPMScheduler)        vp edm flow
//   ddim             DDIM, eta = 0 deterministic .. 1 DDPM-like noise  (DDIMScheduler)        vp edm flow
//   euler            Euler on the probability-flow ODE                 (EulerDiscrete / FlowMatchEulerDiscrete)
//   euler_ancestral  Euler with ancestral noise (eta)                  (EulerAncestralDiscrete) vp edm
//   heun             Heun's second order, Euler for the last step      (HeunDiscrete / FlowMatchHeunDiscrete)
//   dpmpp_2m         DPM-Solver++ multistep, order 2                   (DPMSolverMultistep)   vp edm flow
//   dpmpp_2s         DPM-Solver++ singlestep, order 2                  (DPMSolverSinglestep)  vp edm flow
//   unipc            UniPC, bh2, order 2 predictor + corrector         (UniPCMultistep)       vp edm flow
//   lms              linear multistep in sigma, order 4                (LMSDiscrete)          vp edm
//   pndm             pseudo linear multistep (PLMS)                    (PNDM, skip_prk_steps) vp
// Each matches the diffusers scheduler beside it (0.36, defaults, with clip_sample off and the final level
// clean: alpha = 1, sigma = 0) on the same grid; tests/fixtures/diffusion_solvers pins them.
//
// Frames: euler, euler_ancestral, heun and lms step x/alpha in sigma/alpha (k-diffusion) for vp and edm,
// and x in t for flow (the flow ODE, where sigma/alpha is infinite at t = 1); the DPM-Solver family,
// UniPC, DDIM and DDPM step in (alpha, sigma) directly, so alpha = 0 at flow's t = 1 is no problem.
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/inference/diffusion/schedule.h"
#include "dew/processes/prediction.h"

namespace dew::inference::diffusion {

using processes::Denoised;

// x_t: [B, ...] in the process's space; t: float32 [B] on x_t's device (every row the same time). Returns
// the model's x0 and eps for x_t, both shaped like x_t.
using Denoiser = std::function<Denoised(const at::Tensor& x_t, const at::Tensor& t)>;
// Fresh standard normal noise shaped like (and on the device of) `like`; stochastic solvers call it once per
// step that adds noise, in step order.
using NoiseDraw = std::function<at::Tensor(const at::Tensor& like)>;

struct SolverOptions {
  // Noise scale of ddim (default 0: deterministic) and euler_ancestral (default 1: full ancestral noise).
  // Other solvers ignore it.
  std::optional<double> eta;
};

// Everything a solver's loop needs.
struct SolveContext {
  const NoiseProcess& process;
  const Schedule& schedule;
  const Denoiser& denoiser;
  const NoiseDraw& noise;
  const SolverOptions& options;

  // Calls the denoiser at model time schedule.t[i] (t as a [B] tensor).
  Denoised denoise(const at::Tensor& x, std::size_t i) const;
};

class Solver {
 public:
  virtual ~Solver() = default;
  virtual const char* name() const = 0;
  virtual const char* summary() const = 0;
  virtual std::vector<ProcessKind> processes() const = 0;  // the processes it supports
  virtual bool stochastic() const { return false; }        // draws noise (for some options)
  // Denoiser calls for a schedule of `steps` model times.
  virtual std::int64_t evaluations(std::int64_t steps) const { return steps; }
  // Walks context.schedule from x (at level 0, t[0]) to the clean level and returns it: the sample x0.
  virtual at::Tensor solve(const SolveContext& context, at::Tensor x) const = 0;

  bool supports(ProcessKind kind) const;
};

// Every solver, in the order above; defined beside the rows (solvers/solver_table.cpp), which sit above
// this interface in the layer order.
const std::vector<std::unique_ptr<Solver>>& solvers();
// The solver called `name`; an unknown name is refused listing the known ones.
const Solver& find_solver(const std::string& name);
// Refuses a process the solver does not support, naming solver, process and the solvers that support it.
void check_supports(const Solver& solver, ProcessKind kind);

// Runs `solver` over `schedule` from x_T, calling `noise` for stochastic steps; returns x0 (same shape).
at::Tensor sample(const NoiseProcess& process, const Solver& solver, const Schedule& schedule,
                  const Denoiser& denoiser, const at::Tensor& x_T, const NoiseDraw& noise,
                  const SolverOptions& options = {});
// The usual call: solver by name, `steps` model times of `spacing`, ancestral noise from `generator`
// (standard normal draws on the generator's device, moved to x_T's; same generator state, same samples).
at::Tensor sample(const NoiseProcess& process, const std::string& solver, Spacing spacing, std::int64_t steps,
                  const Denoiser& denoiser, const at::Tensor& x_T, at::Generator generator,
                  const SolverOptions& options = {});
// x_T for `process` (what `sample` starts from): N(0, I) for vp and flow, sigma_max * N(0, I) for edm;
// float32 [shape] drawn on the generator's device, then moved to `device`.
at::Tensor initial_noise(const NoiseProcess& process, at::IntArrayRef shape, at::Generator generator,
                         const at::Device& device = at::kCPU);
// A NoiseDraw from a generator (as `sample` uses).
NoiseDraw generator_noise(at::Generator generator);

}  // namespace dew::inference::diffusion
