// The diffusion solvers against diffusers 0.36's schedulers (tests/fixtures/diffusion_solvers, from
// tools/reference/make_diffusion_solver_fixtures.py), the exact-denoiser property for every solver and
// process it supports, refusals by name, and seeded determinism.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "dew/core/error.h"
#include "dew/inference/diffusion/solver.h"
#include "test_support.h"

namespace {

using namespace dew::inference::diffusion;
using dew::processes::NoiseProcessConfig;
using dew::processes::Prediction;
using dew::processes::from_prediction;
using Json = nlohmann::json;

const Json& fixture() {
  static const Json doc = [] {
    std::ifstream in(dew::test::fixtures() / "diffusion_solvers" / "solvers.json");
    return Json::parse(in);
  }();
  return doc;
}

NoiseProcess make_process(const std::string& kind) {
  NoiseProcessConfig config;
  config.process = kind;
  return NoiseProcess(config);
}

at::Tensor from_flat(const Json& values, at::IntArrayRef shape) {
  return at::tensor(values.get<std::vector<double>>(), at::kDouble).to(at::kFloat).view(shape);
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

// The fixture's fake model (see the generator's docstring): 0.5 x + 0.1 timestep / 1000, read as eps for vp
// and as the flow velocity for flow; records the time of every call.
Denoiser fake_model(const NoiseProcess& process, std::vector<double>& calls) {
  return [&process, &calls](const at::Tensor& x, const at::Tensor& t) {
    calls.push_back(t[0].item<double>());
    const bool flow = process.kind() == dew::processes::ProcessKind::flow;
    const at::Tensor timestep = flow ? 1000.0 * t : t;  // diffusers' timestep: vp index, flow 1000 t
    const at::Tensor out = 0.5 * x + 0.1 * (timestep / 1000.0).view({-1, 1, 1, 1});
    const auto [alpha, sigma] = process.alpha_sigma(t);
    return from_prediction(flow ? Prediction::flow_velocity : Prediction::noise, out, x, alpha, sigma);
  };
}

TEST(DiffusionSolvers, MatchDiffusersSchedulersOnTheSameGrid) {
  const Json& doc = fixture();
  const auto shape = doc["shape"].get<std::vector<int64_t>>();
  for (const Json& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const NoiseProcess process = make_process(c["process"]);
    const Schedule schedule = make_schedule(process, parse_spacing(c["spacing"]), c["steps"].get<int64_t>());
    // The grid: vp integer timesteps exactly; karras's fractional ones via the log-sigma interpolation,
    // which diffusers stores as float32 (ulp 6e-5 near 1000, so 1e-3 allows a few ulps and the float64/
    // float32 sigma round trip); flow t = float32 timestep / 1000 (ulp 6e-8).
    const auto grid = c["grid"].get<std::vector<double>>();
    const double time_tol = c["process"] == "flow" ? 1e-6 : 1e-3;
    ASSERT_EQ(schedule.t.size(), grid.size());
    for (size_t i = 0; i < grid.size(); ++i) EXPECT_NEAR(schedule.t[i], grid[i], time_tol) << "grid " << i;
    if (name == "euler_karras") {  // diffusers' karras sigmas are the levels dew steps in
      const auto sigmas = c["sigmas"].get<std::vector<double>>();
      for (size_t i = 0; i < sigmas.size(); ++i)
        EXPECT_NEAR(schedule.karras_sigma(i), sigmas[i], 1e-5 * std::max(1.0, sigmas[i])) << "sigma " << i;
    }

    at::Tensor x = from_flat(c["start"], shape);
    if (c["frame"] == "k") x = x * schedule.alpha[0];  // diffusers' sample is x / alpha there
    std::vector<at::Tensor> draws;
    for (const Json& z : c["noise"]) draws.push_back(from_flat(z, shape));
    size_t drawn = 0;
    const NoiseDraw noise = [&](const at::Tensor& like) {
      if (drawn >= draws.size()) ADD_FAILURE() << "more noise draws than diffusers made";
      return drawn < draws.size() ? draws[drawn++] : at::zeros_like(like);
    };
    SolverOptions options;
    if (c.contains("eta")) options.eta = c["eta"].get<double>();
    std::vector<double> calls;
    const at::Tensor out = sample(process, find_solver(c["solver"]), schedule, fake_model(process, calls), x, noise, options);

    const auto expected_calls = c["calls"].get<std::vector<double>>();
    ASSERT_EQ(calls.size(), expected_calls.size());
    EXPECT_EQ(find_solver(c["solver"]).evaluations(10), static_cast<int64_t>(calls.size()));
    for (size_t i = 0; i < calls.size(); ++i) EXPECT_NEAR(calls[i], expected_calls[i], time_tol) << "call " << i;
    // Every draw diffusers made was used, but for the one at a final step that adds zero variance.
    EXPECT_GE(drawn + 1, draws.size());

    // float32 arithmetic: ~10 roundings (6e-8 each) per step, 10-19 model calls, and the steps' coefficients
    // amplify an input error by up to 1/alpha ~ 12 near vp's t = 999 (diffusers keeps its coefficients in
    // float32, dew in float64): ~10 * 20 * 6e-8 * 12 = 1.4e-4 of the largest value; 2e-4 allows for that.
    const at::Tensor expected = from_flat(c["x0"], shape);
    const double tol = 2e-4 * std::max(1.0, max_abs(expected));
    EXPECT_LT(max_abs(out - expected), tol) << "max |dew - diffusers| = " << max_abs(out - expected)
                                            << " (tolerance " << tol << ")";
  }
}

TEST(DiffusionSolvers, FixtureComparisonCanFail) {
  // dpmpp_2m's grid run with dpmpp_2s's update (same grid, same model) must miss the 2m reference by far
  // more than the tolerance: the comparison above separates solvers.
  const Json& doc = fixture();
  const auto shape = doc["shape"].get<std::vector<int64_t>>();
  for (const Json& c : doc["cases"]) {
    if (c["name"] != "dpmpp_2m") continue;
    const NoiseProcess process = make_process("vp");
    const Schedule schedule = make_schedule(process, Spacing::trailing, 10);
    std::vector<double> calls;
    const NoiseDraw none = [](const at::Tensor& like) { return at::zeros_like(like); };
    const at::Tensor out = sample(process, find_solver("dpmpp_2s"), schedule, fake_model(process, calls),
                                  from_flat(c["start"], shape), none);
    const at::Tensor expected = from_flat(c["x0"], shape);
    EXPECT_GT(max_abs(out - expected), 100 * 2e-4 * max_abs(expected));
  }
}

TEST(DiffusionSolvers, SpacingsMatchDiffusersForStepsThatDoNotDivideT) {
  const NoiseProcess vp = make_process("vp");
  for (const Json& s : fixture()["spacings"]) {
    SCOPED_TRACE(s["spacing"].get<std::string>());
    const Schedule schedule = make_schedule(vp, parse_spacing(s["spacing"]), s["steps"].get<int64_t>());
    const auto t = s["t"].get<std::vector<double>>();
    ASSERT_EQ(schedule.t.size(), t.size());
    // Integers exactly (1e-9); linspace's halves are exact in float32; karras as above (1e-3).
    for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(schedule.t[i], t[i], s["spacing"] == "karras" ? 1e-3 : 1e-9) << i;
  }
}

TEST(DiffusionSolvers, SpacingsSpanEachProcessRange) {
  const NoiseProcess edm = make_process("edm"), flow = make_process("flow");
  const Schedule karras = make_schedule(edm, Spacing::karras, 5);
  EXPECT_NEAR(karras.t.front(), 80.0, 1e-9);
  EXPECT_NEAR(karras.t.back(), 0.002, 1e-12);
  EXPECT_EQ(karras.alpha.back(), 1.0);
  EXPECT_EQ(karras.sigma.back(), 0.0);
  const Schedule lin = make_schedule(flow, Spacing::linspace, 4);
  EXPECT_NEAR(lin.t.front(), 1.0, 1e-12);
  EXPECT_NEAR(lin.t.back(), kFlowTimeMin, 1e-12);
  const Schedule trailing = make_schedule(flow, Spacing::trailing, 4);
  EXPECT_NEAR(trailing.t[1], kFlowTimeMin + 0.75 * (1 - kFlowTimeMin), 1e-12);
  EXPECT_EQ(parse_spacing("uniform"), Spacing::linspace);
  EXPECT_NE(dew::test::error_of([] { parse_spacing("cosine"); }).find("\"cosine\""), std::string::npos);
  EXPECT_NE(dew::test::error_of([&] { make_schedule(make_process("vp"), Spacing::leading, 1001); }).find("1001"), std::string::npos);
  EXPECT_NE(dew::test::error_of([&] { make_schedule(edm, Spacing::karras, 0); }).find("steps = 0"), std::string::npos);
}

// A denoiser that knows x0: eps = (x_t - alpha x0) / sigma is the exact noise of x_t, so every solver's
// steps stay on the exact trajectory and it must end at x0.
TEST(DiffusionSolvers, ExactDenoiserRecoversTheCleanSampleForEverySolverAndProcess) {
  const at::Tensor x0 = at::randn({2, 1, 4, 4}, at::make_generator<at::CPUGeneratorImpl>(3)).clamp(-1, 1);
  int runs = 0;
  for (const std::string kind : {"vp", "edm", "flow"}) {
    const NoiseProcess process = make_process(kind);
    const Denoiser exact = [&](const at::Tensor& x, const at::Tensor& t) {
      const auto [alpha, sigma] = process.alpha_sigma(t);
      const at::Tensor a = alpha.view({-1, 1, 1, 1}), s = sigma.view({-1, 1, 1, 1});
      return Denoised{x0, (x - a * x0) / s};
    };
    for (const auto& solver : solvers()) {
      if (!solver->supports(process.kind())) continue;
      SCOPED_TRACE(kind + " " + solver->name());
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
      const at::Tensor x_T = initial_noise(process, {2, 1, 4, 4}, generator);
      const at::Tensor out = sample(process, solver->name(), default_spacing(process.kind()), 12, exact, x_T, generator);
      // float32: each step's roundings (~10 of 6e-8) act on values as large as x_T (edm: 80 N(0,1), up to
      // ~300), for up to 23 calls: 300 * 6e-7 * 23 = 4e-3 absolute; vp and flow (|x_T| ~ 4) 1e-4 of that.
      const double tol = 6e-7 * std::max(1.0, max_abs(x_T)) * static_cast<double>(solver->evaluations(12));
      EXPECT_LT(max_abs(out - x0), tol) << "max error " << max_abs(out - x0);
      ++runs;
    }
  }
  EXPECT_EQ(runs, 10 + 9 + 7);  // every solver on vp, all but pndm on edm, all but pndm/lms/euler_ancestral on flow
}

TEST(DiffusionSolvers, RefusalsNameSolverProcessAndAlternatives) {
  const NoiseProcess flow = make_process("flow"), edm = make_process("edm");
  const Denoiser never = [](const at::Tensor&, const at::Tensor&) -> Denoised { throw std::logic_error("called"); };
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0);
  const at::Tensor x = at::zeros({1, 1, 2, 2});
  for (const std::string solver : {"pndm", "lms", "euler_ancestral"}) {
    const std::string message =
        dew::test::error_of([&] { sample(flow, solver, Spacing::linspace, 4, never, x, generator); });
    EXPECT_NE(message.find("\"" + solver + "\""), std::string::npos) << message;
    EXPECT_NE(message.find("flow process"), std::string::npos) << message;
    EXPECT_NE(message.find("dpmpp_2m"), std::string::npos) << message;  // an alternative for flow
  }
  const std::string pndm = dew::test::error_of([&] { sample(edm, "pndm", Spacing::karras, 4, never, x, generator); });
  EXPECT_NE(pndm.find("needs vp"), std::string::npos) << pndm;
  EXPECT_NE(pndm.find("edm process"), std::string::npos) << pndm;
  const std::string unknown = dew::test::error_of([] { find_solver("dpm_fast"); });
  EXPECT_NE(unknown.find("\"dpm_fast\""), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("unipc"), std::string::npos) << unknown;
  SolverOptions bad;
  bad.eta = -1;
  const std::string eta = dew::test::error_of([&] {
    sample(make_process("vp"), "ddim", Spacing::trailing, 2,
           [](const at::Tensor& x, const at::Tensor&) { return Denoised{x, x}; }, x, generator, bad);
  });
  EXPECT_NE(eta.find("eta = -1"), std::string::npos) << eta;
}

TEST(DiffusionSolvers, SameSeedSameSamples) {
  const NoiseProcess vp = make_process("vp");
  const Denoiser model = [](const at::Tensor& x, const at::Tensor& t) {
    return Denoised{0.3 * x, x + 0.001 * t.view({-1, 1, 1, 1})};
  };
  const auto run = [&](const std::string& solver, uint64_t seed) {
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    const at::Tensor x_T = initial_noise(vp, {2, 1, 4, 4}, generator);
    return sample(vp, solver, Spacing::trailing, 6, model, x_T, generator);
  };
  for (const std::string solver : {"ddpm", "euler_ancestral"}) {
    EXPECT_TRUE(at::equal(run(solver, 5), run(solver, 5))) << solver;
    EXPECT_GT(max_abs(run(solver, 5) - run(solver, 6)), 1e-3) << solver;
  }
  // ddim at eta 1 draws noise too; at its default eta 0 the seed only picks x_T.
  SolverOptions eta1;
  eta1.eta = 1.0;
  at::Generator a = at::make_generator<at::CPUGeneratorImpl>(5), b = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor x_T = at::randn({2, 1, 4, 4}, a);
  at::randn({2, 1, 4, 4}, b);
  EXPECT_TRUE(at::equal(sample(vp, "ddim", Spacing::trailing, 6, model, x_T, a, eta1),
                        sample(vp, "ddim", Spacing::trailing, 6, model, x_T, b, eta1)));
}

}  // namespace
