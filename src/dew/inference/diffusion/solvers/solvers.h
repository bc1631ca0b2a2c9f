#pragma once
// The rows of the solver table (solver.h), one file each, and what several of them share.
#include <cmath>
#include <memory>
#include <vector>

#include "dew/inference/diffusion/solver.h"

namespace dew::inference::diffusion {

std::unique_ptr<Solver> make_ddpm_solver();
std::unique_ptr<Solver> make_ddim_solver();
std::unique_ptr<Solver> make_euler_solver();
std::unique_ptr<Solver> make_euler_ancestral_solver();
std::unique_ptr<Solver> make_heun_solver();
std::unique_ptr<Solver> make_dpmpp_2m_solver();
std::unique_ptr<Solver> make_dpmpp_2s_solver();
std::unique_ptr<Solver> make_unipc_solver();
std::unique_ptr<Solver> make_lms_solver();
std::unique_ptr<Solver> make_pndm_solver();

// The coordinates the Euler-type solvers (euler, euler_ancestral, heun, lms) step in: y = x / scale moves
// along `level` with dy/dlevel = derivative(x0, eps).
//   vp, edm (k-diffusion): scale = alpha, level = sigma/alpha, y = x0 + level eps, dy/dlevel = eps.
//   flow: scale = alpha + sigma (= 1), level = sigma / (alpha + sigma) (= t), y = (1 - t) x0 + t eps,
//         dy/dt = eps - x0 (the flow velocity diffusers' FlowMatch schedulers integrate).
struct OdeFrame {
  bool flow = false;
  std::vector<double> scale, level;  // N + 1 entries, as the schedule's levels

  at::Tensor derivative(const Denoised& d) const { return flow ? d.eps - d.x0 : d.eps; }
};
OdeFrame ode_frame(const SolveContext& context);

// exp(lambda(to) - lambda(from)) inverted, i.e. e^{-h} with h = lambda(to) - lambda(from), computed as
// (sigma_to alpha_from) / (alpha_to sigma_from) so that the ends (alpha_from = 0 at flow's t = 1,
// sigma_to = 0 at the clean level) give 0 instead of inf - inf.
double exp_neg_h(const Schedule& s, std::size_t from, std::size_t to);
// h_a / h_b for lambda differences that may both be infinite (a step from flow's t = 1, where lambda =
// -inf): their ratio tends to 1 there, which is the value returned.
double lambda_ratio(double h_a, double h_b);

}  // namespace dew::inference::diffusion
