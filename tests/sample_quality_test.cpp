// dew eval's sample-quality figures for diffusion runs (runs/kinds/sample_quality.h), measured with the
// Fashion-MNIST classifier dew ships, on real Fashion-MNIST test images: the figures a perfect generator
// (one that returns real images) and a useless one (uniform noise) get, and `dew eval --json` reporting
// them for a run trained on Fashion-MNIST. Needs Debian's dataset-fashion-mnist (set-up installs it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dew/data/images/image_set.h"
#include "dew/runs/kinds/sample_quality.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFashion = "/usr/share/datasets/fashion-mnist";

bool fashion_installed() { return fs::exists(kFashion / "t10k-images-idx3-ubyte.gz"); }

at::Tensor to_unit(const at::Tensor& pixels) { return pixels.to(at::kFloat).div(127.5).sub(1.0); }

TEST(SampleQuality, RealImagesScoreAsRealAndNoiseDoesNot) {
  if (!fashion_installed()) GTEST_SKIP() << kFashion << " is not installed (dataset-fashion-mnist)";
  const auto test = dew::data::images::read_images(kFashion, "t10k");
  std::string why;
  auto classifier = dew::runs::reference_classifier(1, 28, 10, &why);
  ASSERT_TRUE(classifier.has_value()) << why;

  // The shipped classifier's accuracy on the whole test split is what tools/make_fashion_classifier.sh
  // recorded (0.9252). A perfect generator's class_accuracy is that accuracy; +-0.002 (20 of 10,000
  // images) allows borderline images whose top two logits differ by float32 rounding on another CPU.
  const at::Tensor real = to_unit(test.pixels);
  const auto self = dew::runs::sample_quality(*classifier, real, real, test.labels);
  EXPECT_NEAR(self.class_accuracy, 0.9252, 0.002);
  // The same set on both sides: means and covariances equal, distance 0 up to the float64 eigensolver's
  // rounding on 128-dimensional covariances (relative 1e-10 of the trace, orders below the figures below).
  EXPECT_NEAR(self.frechet_distance, 0.0, 1e-3);

  // Two disjoint halves of the real images: a small distance (sampling noise only); uniform noise images:
  // far away, and classified near chance. The factor 20 is loose: the measured ratio is in the hundreds.
  const auto first = real.narrow(0, 0, 5000), second = real.narrow(0, 5000, 5000);
  const auto halves = dew::runs::sample_quality(*classifier, first, second, test.labels.narrow(0, 5000, 5000));
  const auto noise = at::rand({2000, 1, 28, 28}, at::make_generator<at::CPUGeneratorImpl>(3)) * 2 - 1;
  const auto junk = dew::runs::sample_quality(*classifier, first, noise, test.labels.narrow(0, 0, 2000));
  EXPECT_GT(halves.frechet_distance, 0.0);
  EXPECT_GT(junk.frechet_distance, 20 * halves.frechet_distance) << halves.frechet_distance << " vs " << junk.frechet_distance;
  EXPECT_LT(junk.class_accuracy, 0.3);  // one class for all noise: at most ~0.1 of labels match, plus slack
}

TEST(SampleQuality, DewEvalReportsThemForAFashionRun) {
  if (!fashion_installed()) GTEST_SKIP() << kFashion << " is not installed (dataset-fashion-mnist)";
  dew::test::TempDir runs;
  const fs::path run = runs / "fashion";
  auto train = dew::test::run_command(dew::test::dew_single_threaded(
      "train diffusion --data " + kFashion.string() + " --out " + run.string() +
      " --set model.dim=32 --set model.depth=1 --set model.heads=2 --set trainer.steps=2 --set trainer.batch_size=8"
      " --set trainer.eval_every=0 --set preview.per_class=0 --set trainer.device=cpu --set trainer.peak_flops=1"));
  ASSERT_EQ(train.status, 0) << train.output;
  auto eval = dew::test::run_command(dew::test::dew_single_threaded("eval " + run.string() + " --json --samples 40 --sample-steps 2"));
  ASSERT_EQ(eval.status, 0) << eval.output;
  auto j = nlohmann::json::parse(eval.output.substr(eval.output.find('{')));
  // Two training steps draw blobs: far from real images, and classified about as well as chance.
  EXPECT_GT(j.at("frechet_distance").get<double>(), 1.0) << eval.output;
  EXPECT_GE(j.at("class_accuracy").get<double>(), 0.0);
  EXPECT_LE(j.at("class_accuracy").get<double>(), 0.5) << eval.output;
  EXPECT_GT(j.at("val_loss").get<double>(), 0.0);
  EXPECT_NE(eval.output.find("not Inception"), std::string::npos) << eval.output;
}

}  // namespace
