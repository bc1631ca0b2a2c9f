// The table of solvers (declared in solver.h): one row per file in this folder. A new solver is a file here
// and a line below.
#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {

const std::vector<std::unique_ptr<Solver>>& solvers() {
  static const std::vector<std::unique_ptr<Solver>> table = [] {
    std::vector<std::unique_ptr<Solver>> rows;
    rows.push_back(make_ddpm_solver());
    rows.push_back(make_ddim_solver());
    rows.push_back(make_euler_solver());
    rows.push_back(make_euler_ancestral_solver());
    rows.push_back(make_heun_solver());
    rows.push_back(make_dpmpp_2m_solver());
    rows.push_back(make_dpmpp_2s_solver());
    rows.push_back(make_unipc_solver());
    rows.push_back(make_lms_solver());
    rows.push_back(make_pndm_solver());
    return rows;
  }();
  return table;
}

}  // namespace dew::inference::diffusion
