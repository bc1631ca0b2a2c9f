// Noise processes, prediction conversions, loss weights and time sampling (objectives/diffusion/):
// the vp tables and add_noise against diffusers' DDPMScheduler, the flow shift against
// FlowMatchEulerDiscreteScheduler, vp sigma<->t against k-diffusion's algorithm (diffusers' Euler with
// Karras sigmas), the forward marginals against the closed form, conversions round-tripping, and the
// weights against hand-computed values. Fixture: tools/reference/make_diffusion_process_fixtures.py.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "dew/objectives/diffusion/edm_preconditioning.h"
#include "dew/objectives/diffusion/loss_weighting.h"
#include "dew/processes/noise_process.h"
#include "dew/objectives/diffusion/time_sampling.h"
#include "test_support.h"

namespace {
using namespace dew::objectives::diffusion;
using namespace dew::processes;
using dew::test::error_of;

const nlohmann::json& fixture() {
  static const nlohmann::json j =
      nlohmann::json::parse(dew::test::read_text(dew::test::fixtures() / "diffusion_process" / "process.json"));
  return j;
}

at::Tensor doubles(const nlohmann::json& values) { return at::tensor(values.get<std::vector<double>>(), at::kDouble); }

NoiseProcess make(const std::string& process, double shift = 1.0) {
  NoiseProcessConfig c;
  c.process = process;
  c.flow_shift = shift;
  return NoiseProcess(c);
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

TEST(NoiseProcess, VpTablesAreDiffusersBitForBit) {
  // Same float32 linspace / betas_for_alpha_bar and the same float32 cumprod as diffusers: exact.
  for (const auto& row : fixture()["ddpm_linear"]) {
    NoiseProcessConfig c;
    c.process = "vp";
    c.train_steps = row["train_steps"];
    c.beta_start = row["beta_start"];
    c.beta_end = row["beta_end"];
    NoiseProcess p(c);
    ASSERT_EQ(p.alphas_cumprod().scalar_type(), at::kDouble);
    EXPECT_TRUE(p.alphas_cumprod().equal(doubles(row["alphas_cumprod"]))) << "linear T=" << c.train_steps;
  }
  for (const auto& row : fixture()["ddpm_cosine"]) {
    NoiseProcessConfig c;
    c.process = "vp";
    c.schedule = "cosine";
    c.train_steps = row["train_steps"];
    NoiseProcess p(c);
    EXPECT_TRUE(p.alphas_cumprod().equal(doubles(row["alphas_cumprod"]))) << "cosine T=" << c.train_steps;
  }
  // The fields matter: the T=100 linear table is not a prefix of the default one.
  EXPECT_FALSE(make("vp").alphas_cumprod().narrow(0, 0, 100).equal(doubles(fixture()["ddpm_linear"][1]["alphas_cumprod"])));
  EXPECT_FALSE(make("flow").alphas_cumprod().defined());
}

TEST(NoiseProcess, VpAddNoiseMatchesDiffusers) {
  const auto& f = fixture()["ddpm_add_noise"];
  const auto shape = f["shape"].get<std::vector<std::int64_t>>();
  const auto x0 = doubles(f["x0"]).to(at::kFloat).reshape(shape), eps = doubles(f["eps"]).to(at::kFloat).reshape(shape);
  const auto t = at::tensor(f["timesteps"].get<std::vector<std::int64_t>>());
  const auto got = make("vp").add_noise(x0, eps, t);
  EXPECT_EQ(got.scalar_type(), at::kFloat);
  // diffusers takes sqrt(1 - abar) in float32, dew in float64 then rounds: up to one float32 ulp apart in
  // sigma and in alpha, then two products and a sum of terms below 2: 4 roundings * 2 * 6e-8 ~ 1e-6.
  EXPECT_LT(max_abs(got - doubles(f["x_t"]).to(at::kFloat).reshape(shape)), 2e-6);
}

TEST(NoiseProcess, FlowShiftAndNoisingMatchFlowMatchEuler) {
  const auto& f = fixture()["flow_shift"];
  const auto p = make("flow", f["shift"]);
  const auto unshifted = doubles(f["unshifted"]).to(at::kFloat), sigmas = doubles(f["sigmas"]).to(at::kFloat);
  // The same three float32 operations as diffusers on values <= 1: a few ulps at most.
  EXPECT_LT(max_abs(p.shift_time(unshifted) - sigmas), 3e-7);
  EXPECT_TRUE(make("flow").shift_time(unshifted).equal(unshifted));  // shift 1 is the identity
  EXPECT_TRUE(make("vp").shift_time(unshifted).equal(unshifted));

  const auto shape = f["shape"].get<std::vector<std::int64_t>>();
  const auto x0 = doubles(f["x0"]).to(at::kFloat).reshape(shape), eps = doubles(f["eps"]).to(at::kFloat).reshape(shape);
  const auto t = sigmas.index_select(0, at::tensor(f["picks"].get<std::vector<std::int64_t>>()));
  // sigma*eps + (1-sigma)*x0 in float32 either way: two products and a sum of terms below 1.
  EXPECT_LT(max_abs(p.add_noise(x0, eps, t) - doubles(f["x_t"]).to(at::kFloat).reshape(shape)), 5e-7);
}

TEST(NoiseProcess, VpSigmaToTimeIsKDiffusions) {
  const auto& f = fixture()["euler_karras"];
  const auto p = make("vp");
  const auto sigmas = doubles(f["sigmas"]);
  const auto t = p.time_from_karras_sigma(sigmas);
  EXPECT_EQ(t.scalar_type(), at::kDouble);
  // Against the same algorithm on a float64 table: float64 rounding only.
  EXPECT_LT(max_abs(t - doubles(f["timesteps_float64"])), 1e-9);
  // Against diffusers' own, whose log-sigma table is float32 (|log sigma| <= 5: ~3e-7 absolute) and whose
  // timesteps are float32 (ulp 6e-5 at 1000); log sigma moves >= 0.01 per timestep, so t differs by
  // <= 3e-7/0.01 + 6e-5 ~ 1e-4.
  EXPECT_LT(max_abs(t - doubles(f["timesteps"])), 2e-4);
  // karras_sigma inverts it inside the table (the first sigma is the table's last rounded to float32, the
  // last lies below the table's first and clamps: both ends are left out).
  const auto inside = sigmas.narrow(0, 1, sigmas.size(0) - 2);
  EXPECT_LT(max_abs(p.karras_sigma(p.time_from_karras_sigma(inside)) / inside - 1), 1e-12);
}

TEST(NoiseProcess, AlphaSigmaAndTimesOfEachProcess) {
  const auto vp = make("vp");
  const auto abar = vp.alphas_cumprod();
  // Integer t reads the table; fractional t interpolates log(sigma/alpha) (geometric mean at the half).
  const auto t = at::tensor({0.0, 10.0, 10.5, 999.0}, at::kDouble);
  const auto [a, s] = vp.alpha_sigma(t);
  EXPECT_NEAR(a[1].item<double>(), std::sqrt(abar[10].item<double>()), 1e-15);
  EXPECT_NEAR(s[3].item<double>(), std::sqrt(1 - abar[999].item<double>()), 1e-15);
  const double s10 = std::sqrt((1 - abar[10].item<double>()) / abar[10].item<double>());
  const double s11 = std::sqrt((1 - abar[11].item<double>()) / abar[11].item<double>());
  EXPECT_NEAR(vp.karras_sigma(t)[2].item<double>(), std::sqrt(s10 * s11), 1e-14);
  EXPECT_LT(max_abs(a * a + s * s - 1), 1e-14);                        // variance preserving everywhere
  EXPECT_LT(max_abs(vp.time_from_karras_sigma(vp.karras_sigma(t)) - t), 1e-9);
  EXPECT_EQ(vp.alpha_sigma(at::tensor({3.0f})).first.scalar_type(), at::kFloat);
  EXPECT_EQ(vp.t_max(), 999.0);
  EXPECT_EQ(vp.t_min(), 0.0);
  EXPECT_TRUE(vp.model_time(at::tensor({5.0f})).equal(at::tensor({5.0f})));

  const auto edm = make("edm");
  const auto sig = at::tensor({0.002f, 1.0f, 80.0f});
  EXPECT_TRUE(edm.alpha_sigma(sig).first.equal(at::ones({3})));
  EXPECT_TRUE(edm.alpha_sigma(sig).second.equal(sig));
  EXPECT_TRUE(edm.karras_sigma(sig).equal(sig));
  EXPECT_NEAR(edm.model_time(sig)[2].item<float>(), std::log(80.0f) / 4, 1e-6);
  EXPECT_EQ(edm.t_max(), 80.0);
  EXPECT_EQ(edm.t_min(), 0.002);

  const auto flow = make("flow");
  const auto ft = at::tensor({0.0f, 0.25f, 1.0f});
  EXPECT_TRUE(flow.alpha_sigma(ft).first.equal(at::tensor({1.0f, 0.75f, 0.0f})));
  EXPECT_TRUE(flow.alpha_sigma(ft).second.equal(ft));
  EXPECT_TRUE(flow.model_time(ft).equal(at::tensor({0.0f, 250.0f, 1000.0f})));
  EXPECT_NEAR(flow.karras_sigma(ft)[1].item<float>(), 1.0f / 3, 1e-7);
  EXPECT_TRUE(std::isinf(flow.karras_sigma(ft)[2].item<float>()));
  EXPECT_LT(max_abs(flow.time_from_karras_sigma(flow.karras_sigma(ft)) - ft), 1e-7);  // inf maps back to 1
  EXPECT_EQ(flow.t_max(), 1.0);
}

// x_t over many eps draws at fixed x0 and t has mean alpha*x0 and variance sigma^2 per element.
TEST(NoiseProcess, ForwardMarginalsMatchTheClosedForm) {
  constexpr std::int64_t N = 200000;
  const auto x0_row = at::tensor({-1.0f, -0.3f, 0.5f, 1.0f});
  for (const auto& [name, times] : std::vector<std::pair<std::string, std::vector<float>>>{
           {"vp", {0, 300, 999}}, {"edm", {0.1f, 1.0f, 20.0f}}, {"flow", {0.05f, 0.5f, 0.95f}}}) {
    const auto p = make(name);
    for (float tv : times) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
      const auto x0 = x0_row.expand({N, 4}).contiguous();
      const auto eps = at::randn({N, 4}, gen);
      const auto xt = p.add_noise(x0, eps, at::full({N}, tv)).to(at::kDouble);
      // The closed form, independently of alpha_sigma: vp from the diffusers table, edm (1, t), flow (1-t, t).
      double alpha = 1, sigma = tv;
      if (name == "vp") {
        const double abar = doubles(fixture()["ddpm_linear"][0]["alphas_cumprod"])[static_cast<std::int64_t>(tv)].item<double>();
        alpha = std::sqrt(abar), sigma = std::sqrt(1 - abar);
      } else if (name == "flow") {
        alpha = 1 - tv;
      }
      const auto mean = xt.mean(0), var = xt.var(0);
      // 5 standard errors of a mean of N draws (sigma/sqrt N) and of a variance (sigma^2 sqrt(2/(N-1))).
      const double mean_tol = 5 * sigma / std::sqrt(double(N)), var_tol = 5 * sigma * sigma * std::sqrt(2.0 / (N - 1));
      for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(mean[i].item<double>(), alpha * x0_row[i].item<float>(), mean_tol) << name << " t=" << tv;
        EXPECT_NEAR(var[i].item<double>(), sigma * sigma, var_tol) << name << " t=" << tv;
      }
    }
  }
}

TEST(Prediction, ConversionsRoundTrip) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const auto x0 = at::randn({3, 2, 4, 4}, gen), eps = at::randn({3, 2, 4, 4}, gen);
  for (const std::string name : {"vp", "edm", "flow"}) {
    const auto p = make(name);
    const auto t = name == "vp" ? at::tensor({20.0f, 500.0f, 900.0f}) : name == "edm" ? at::tensor({0.05f, 1.0f, 30.0f}) : at::tensor({0.1f, 0.5f, 0.9f});
    const auto [alpha, sigma] = p.alpha_sigma(t);
    const auto xt = p.add_noise(x0, eps, t);
    // Each inverse divides by alpha, sigma or alpha^2 + sigma^2 after a few float32 roundings (~6e-8
    // relative each) of terms of size |x_t| + |eps| (< ~10 here times alpha, sigma <= 30): tolerance
    // 1e-6 * (1 + |x_t|max) / min(alpha, sigma, 1).
    const double amp = std::min({alpha.min().item<double>(), sigma.min().item<double>(), 1.0});
    const double tol = 1e-6 * (1 + max_abs(xt)) / amp;
    for (const std::string pred : {"noise", "sample", "v", "flow"}) {
      if (pred == "flow" && name != "flow") continue;  // u = eps - x0 needs alpha + sigma = 1
      const auto kind = parse_prediction(pred);
      EXPECT_EQ(to_string(kind), pred);
      const auto out = to_prediction(kind, x0, eps, alpha, sigma);
      const auto back = from_prediction(kind, out, xt, alpha, sigma);
      EXPECT_LT(max_abs(back.x0 - x0), tol) << name << " " << pred;
      EXPECT_LT(max_abs(back.eps - eps), tol) << name << " " << pred;
    }
  }
  // The definitions, by hand: alpha 0.6, sigma 0.8, x0 1, eps 2.
  const auto a = at::tensor({0.6f}), s = at::tensor({0.8f}), one = at::ones({1, 1}), two = at::full({1, 1}, 2.0f);
  EXPECT_NEAR(to_prediction(Prediction::velocity, one, two, a, s).item<float>(), 0.6f * 2 - 0.8f, 1e-7);
  EXPECT_NEAR(to_prediction(Prediction::flow_velocity, one, two, a, s).item<float>(), 1.0f, 0);
  // Reading a noise prediction as a sample does not give x0 back (the conversion is not a no-op).
  const auto xt = a * one + s * two;
  EXPECT_GT(std::abs(from_prediction(Prediction::sample, two, xt, a, s).x0.item<float>() - 1.0f), 0.5f);
  EXPECT_NE(error_of([] { parse_prediction("velocity"); }).find("diffusion.prediction = \"velocity\""), std::string::npos);
}

TEST(LossWeighting, MinSnrAndP2AgainstHandValues) {
  // alpha 0.6, sigma 0.8: snr 0.5625 (< gamma 5); alpha 0.99: snr 0.9801/0.0199 = 49.25 (> 5).
  const auto a = at::tensor({0.6, 0.99}, at::kDouble);
  const auto s = at::tensor({0.8, std::sqrt(1 - 0.99 * 0.99)}, at::kDouble);
  const double snr1 = 0.5625, snr2 = 0.9801 / (1 - 0.9801);
  auto near = [](const at::Tensor& got, double w1, double w2) {
    EXPECT_NEAR(got[0].item<double>(), w1, 1e-12 * std::max(1.0, std::abs(w1)));
    EXPECT_NEAR(got[1].item<double>(), w2, 1e-12 * std::max(1.0, std::abs(w2)));
  };
  near(min_snr_weight(Prediction::noise, a, s, 5), 1.0, 5 / snr2);
  near(min_snr_weight(Prediction::sample, a, s, 5), snr1, 5);
  near(min_snr_weight(Prediction::velocity, a, s, 5), snr1 / (snr1 + 1), 5 / (snr2 + 1));
  // Flow: alpha 0.25, sigma 0.75: snr 1/9, the x0 error is sigma * the velocity error.
  near(min_snr_weight(Prediction::flow_velocity, at::tensor({0.25, 0.25}, at::kDouble), at::tensor({0.75, 0.75}, at::kDouble), 5),
       (1.0 / 9) * 0.5625, (1.0 / 9) * 0.5625);
  // P2 (k 1, gamma 1): 1/(1+snr) on noise; on x0 snr/(1+snr); on v (vp) alpha^2/(1+snr).
  near(p2_weight(Prediction::noise, a, s, 1, 1), 1 / (1 + snr1), 1 / (1 + snr2));
  near(p2_weight(Prediction::sample, a, s, 1, 1), snr1 / (1 + snr1), snr2 / (1 + snr2));
  near(p2_weight(Prediction::velocity, a, s, 1, 1), 0.36 / (1 + snr1), 0.9801 / (1 + snr2));
  near(p2_weight(Prediction::noise, a, s, 2, 0.5), 1 / std::sqrt(2 + snr1), 1 / std::sqrt(2 + snr2));
  // Finite at the ends of a flow schedule (t = 1: alpha 0).
  EXPECT_EQ(min_snr_weight(Prediction::noise, at::zeros({1}), at::ones({1}), 5).item<float>(), 1.0f);
  EXPECT_TRUE(std::isfinite(p2_weight(Prediction::flow_velocity, at::zeros({1}), at::ones({1}), 1, 1).item<float>()));
  EXPECT_NE(error_of([] { parse_weighting("snr"); }).find("diffusion.weighting = \"snr\""), std::string::npos);
}

TEST(EdmPreconditioning, ScalingsAtSigmaOne) {
  // sigma 1, sigma_data 0.5: sigma^2 + sd^2 = 1.25.
  const auto c = edm_scalings(at::tensor({1.0}, at::kDouble), 0.5);
  EXPECT_NEAR(c.c_skip.item<double>(), 0.25 / 1.25, 1e-15);
  EXPECT_NEAR(c.c_out.item<double>(), 0.5 / std::sqrt(1.25), 1e-15);
  EXPECT_NEAR(c.c_in.item<double>(), 1 / std::sqrt(1.25), 1e-15);
  EXPECT_NEAR(c.c_noise.item<double>(), 0.0, 1e-15);
  EXPECT_NEAR(edm_loss_weight(at::tensor({1.0}, at::kDouble), 0.5).item<double>(), 5.0, 1e-14);  // = 1 / c_out^2
}

TEST(TimeSampling, DistributionsAndRefusals) {
  constexpr std::int64_t N = 100000;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  TimeSamplingConfig c;
  // vp uniform: integers in [0, T), mean (T-1)/2 within 5 standard errors (sd T/sqrt 12).
  const auto vp_t = sample_times(make("vp"), c, N, gen);
  EXPECT_TRUE(vp_t.equal(vp_t.floor()));
  EXPECT_GE(vp_t.min().item<float>(), 0);
  EXPECT_LE(vp_t.max().item<float>(), 999);
  EXPECT_NEAR(vp_t.to(at::kDouble).mean().item<double>(), 499.5, 5 * 1000 / std::sqrt(12.0 * N));
  // flow auto = logit-normal: logit(t) ~ N(0.3, 0.7).
  c.logit_mean = 0.3, c.logit_std = 0.7;
  const auto logits = at::logit(sample_times(make("flow"), c, N, gen).to(at::kDouble));
  EXPECT_NEAR(logits.mean().item<double>(), 0.3, 5 * 0.7 / std::sqrt(double(N)));
  EXPECT_NEAR(logits.std().item<double>(), 0.7, 5 * 0.7 / std::sqrt(2.0 * N));
  // edm auto = lognormal: ln sigma ~ N(-1.2, 1.2).
  const auto ln_sigma = sample_times(make("edm"), c, N, gen).to(at::kDouble).log();
  EXPECT_NEAR(ln_sigma.mean().item<double>(), -1.2, 5 * 1.2 / std::sqrt(double(N)));
  EXPECT_NEAR(ln_sigma.std().item<double>(), 1.2, 5 * 1.2 / std::sqrt(2.0 * N));
  // flow uniform with a shift: the shifted 1 - U[0, 1), drawn from the same stream.
  c.kind = "uniform";
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(9), g2 = at::make_generator<at::CPUGeneratorImpl>(9);
  const auto shifted = make("flow", 3.0);
  EXPECT_TRUE(sample_times(shifted, c, 64, g1).equal(shifted.shift_time(1.0 - at::rand({64}, g2))));
  EXPECT_NE(error_of([] { resolve_time_sampling("lognormal", ProcessKind::flow); }).find("diffusion.time_sampling = lognormal"), std::string::npos);
  EXPECT_NE(error_of([] { resolve_time_sampling("logit_normal", ProcessKind::edm); }).find("edm"), std::string::npos);
  EXPECT_NE(error_of([] { resolve_time_sampling("beta", ProcessKind::vp); }).find("\"beta\""), std::string::npos);
}

TEST(NoiseProcessConfig, RefusesBadValuesByName) {
  auto error_for = [](auto change) {
    NoiseProcessConfig c;
    change(c);
    return error_of([&] { NoiseProcess p(c); });
  };
  EXPECT_NE(error_for([](auto& c) { c.process = "ddpm"; }).find("diffusion.process = \"ddpm\""), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.schedule = "sqrt"; }).find("diffusion.schedule = \"sqrt\""), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.process = "vp"; c.beta_end = 1e-5; }).find("diffusion.beta_end = 1e-05"), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.process = "vp"; c.train_steps = 1; }).find("diffusion.train_steps = 1"), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.process = "edm"; c.sigma_max = 0.001; }).find("diffusion.sigma_max = 0.001"), std::string::npos);
  EXPECT_NE(error_for([](auto& c) { c.flow_shift = 0; }).find("diffusion.flow_shift = 0"), std::string::npos);
  EXPECT_EQ(error_for([](auto&) {}), "(no error)");
}

}  // namespace
