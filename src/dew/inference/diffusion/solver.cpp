// What every solver shares (solver.h): finding one by name, the process check, and `sample`. The table
// itself is defined beside its rows, in solvers/solver_table.cpp.
#include <cmath>

#include "dew/core/error.h"
#include "dew/inference/diffusion/solver.h"

namespace dew::inference::diffusion {

bool Solver::supports(ProcessKind kind) const {
  for (ProcessKind k : processes())
    if (k == kind) return true;
  return false;
}

const Solver& find_solver(const std::string& name) {
  std::string known;
  for (const auto& solver : solvers()) {
    if (solver->name() == name) return *solver;
    known += str(known.empty() ? "" : ", ", solver->name());
  }
  fail("diffusion solver \"", name, "\" is not one dew knows; use one of ", known);
}

void check_supports(const Solver& solver, ProcessKind kind) {
  if (solver.supports(kind)) return;
  std::string needs, alternatives;
  for (ProcessKind k : solver.processes()) needs += str(needs.empty() ? "" : " or ", processes::to_string(k));
  for (const auto& other : solvers())
    if (other->supports(kind)) alternatives += str(alternatives.empty() ? "" : ", ", other->name());
  fail("diffusion solver \"", solver.name(), "\" does not support the ", processes::to_string(kind),
       " process (it needs ", needs, "); for ", processes::to_string(kind), " use one of ", alternatives);
}

Denoised SolveContext::denoise(const at::Tensor& x, std::size_t i) const {
  const at::Tensor t = at::full({x.size(0)}, schedule.t[i], x.options().dtype(at::kFloat));
  Denoised d = denoiser(x, t);
  if (!d.x0.defined() || !d.eps.defined() || d.x0.sizes() != x.sizes() || d.eps.sizes() != x.sizes())
    fail("diffusion sampling: the denoiser must return x0 and eps shaped like x_t ", x.sizes());
  return d;
}

at::Tensor sample(const NoiseProcess& process, const Solver& solver, const Schedule& schedule,
                  const Denoiser& denoiser, const at::Tensor& x_T, const NoiseDraw& noise,
                  const SolverOptions& options) {
  check_supports(solver, process.kind());
  if (x_T.dim() < 1 || x_T.size(0) < 1) fail("diffusion sampling: x_T needs a batch dimension, got shape ", x_T.sizes());
  const SolveContext context{process, schedule, denoiser, noise, options};
  return solver.solve(context, x_T);
}

NoiseDraw generator_noise(at::Generator generator) {
  return [generator](const at::Tensor& like) {
    at::Tensor z = at::randn(like.sizes(), generator, at::TensorOptions().dtype(at::kFloat).device(generator.device()));
    return z.to(like.device(), like.scalar_type());
  };
}

at::Tensor sample(const NoiseProcess& process, const std::string& solver, Spacing spacing, std::int64_t steps,
                  const Denoiser& denoiser, const at::Tensor& x_T, at::Generator generator,
                  const SolverOptions& options) {
  const Solver& chosen = find_solver(solver);
  check_supports(chosen, process.kind());
  const Schedule schedule = make_schedule(process, spacing, steps);
  return sample(process, chosen, schedule, denoiser, x_T, generator_noise(std::move(generator)), options);
}

at::Tensor initial_noise(const NoiseProcess& process, at::IntArrayRef shape, at::Generator generator,
                         const at::Device& device) {
  at::Tensor z = at::randn(shape, generator, at::TensorOptions().dtype(at::kFloat).device(generator.device()));
  if (process.kind() == ProcessKind::edm) z = z * process.config().sigma_max;
  return z.to(device);
}

}  // namespace dew::inference::diffusion
