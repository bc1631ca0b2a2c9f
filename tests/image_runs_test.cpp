// Image run kinds end to end through the CLI: `dew train diffusion` (preview grids, exact resume),
// `dew sample` (deterministic grids and per-image PNGs, refusals), `dew eval` (val_loss), and
// `dew train classifier`, on a tiny IDX data set the test writes (4 classes of 8x8 images, each class a
// bright quadrant).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "dew/training/checkpoint.h"
#include "image_test_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::TempDir;

namespace {

using dew::test::write_idx;

struct Data {
  TempDir dir;
  Data() {
    write_idx(dir.path(), "train", 64);
    write_idx(dir.path(), "t10k", 16);
  }
};

std::string tiny_diffusion(const fs::path& data, const fs::path& run, int steps) {
  return "train diffusion --data " + data.string() + " --out " + run.string() +
         " --set model.dim=32 --set model.depth=2 --set model.heads=2 --set model.patch_size=2"
         " --set trainer.batch_size=8 --set trainer.eval_every=3 --set trainer.eval_batches=1 --set trainer.log_every=1"
         " --set trainer.device=cpu --set trainer.peak_flops=1 --set optim.warmup_steps=0 --set optim.decay_steps=6"
         " --set preview.per_class=2 --set sample.steps=3 --set trainer.steps=" + std::to_string(steps);
}

dew::test::CommandResult dew_run(const std::string& args) { return dew::test::run_command(dew::test::dew_single_threaded(args)); }

TEST(ImageRuns, DiffusionTrainsPreviewsResumesExactlyAndSamplesDeterministically) {
  Data data;
  TempDir runs;
  auto straight = dew_run(tiny_diffusion(data.dir.path(), runs / "straight", 6));
  ASSERT_EQ(straight.status, 0) << straight.output;
  EXPECT_TRUE(fs::exists(runs / "straight" / "samples" / "step-3.png")) << straight.output;
  EXPECT_TRUE(fs::exists(runs / "straight" / "samples" / "step-6.png"));
  EXPECT_NE(straight.output.find("preview '"), std::string::npos);

  // Stopped after 3 steps, then resumed to 6: the same weights as the straight run (noise streams, data
  // order and flips are functions of (seed, step, position)).
  auto first = dew_run(tiny_diffusion(data.dir.path(), runs / "stopped", 3));
  ASSERT_EQ(first.status, 0) << first.output;
  auto resumed = dew_run(tiny_diffusion(data.dir.path(), runs / "stopped", 6));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  dew::training::Checkpoint a(runs / "straight" / "6"), b(runs / "stopped" / "6");
  ASSERT_GT(a.params().names().size(), 5u);
  for (const auto& name : a.params().names()) EXPECT_TRUE(at::equal(a.params().whole(name), b.params().whole(name))) << name;

  // A resumed run may change only trainer.*.
  auto changed = dew_run(tiny_diffusion(data.dir.path(), runs / "stopped", 8) + " --set model.depth=3");
  EXPECT_NE(changed.status, 0);
  EXPECT_NE(changed.output.find("model.depth"), std::string::npos) << changed.output;

  // dew sample: the same seed gives the same grid, another seed another; --images writes one PNG each.
  const std::string run = (runs / "straight").string();
  ASSERT_EQ(dew_run("sample " + run + " --out " + (runs / "a.png").string() + " --n 3 --seed 4").status, 0);
  auto again = dew_run("sample " + run + " --out " + (runs / "b.png").string() + " --n 3 --seed 4 --images " + (runs / "each").string());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(dew::test::read_text(runs / "a.png"), dew::test::read_text(runs / "b.png"));
  ASSERT_EQ(dew_run("sample " + run + " --out " + (runs / "c.png").string() + " --n 3 --seed 5").status, 0);
  EXPECT_NE(dew::test::read_text(runs / "a.png"), dew::test::read_text(runs / "c.png"));
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(runs / "each")) ++files;
  EXPECT_EQ(files, 12);  // 4 classes x 3
  // Every solver draws (the table's names, on the flow process where the solver supports it).
  for (const char* solver : {"euler", "heun", "ddim", "dpmpp_2m", "unipc"}) {
    auto s = dew_run("sample " + run + " --out " + (runs / "s.png").string() + " --n 1 --steps 3 --solver " + solver);
    EXPECT_EQ(s.status, 0) << solver << ": " << s.output;
  }

  auto bad_label = dew_run("sample " + run + " --out " + (runs / "x.png").string() + " --labels 0,9");
  EXPECT_NE(bad_label.status, 0);
  EXPECT_NE(bad_label.output.find("--labels holds 9"), std::string::npos) << bad_label.output;
  auto bad_solver = dew_run("sample " + run + " --out " + (runs / "x.png").string() + " --solver pndm");
  EXPECT_NE(bad_solver.status, 0);
  EXPECT_NE(bad_solver.output.find("pndm"), std::string::npos) << bad_solver.output;
  EXPECT_FALSE(fs::exists(runs / "x.png"));

  // dew eval: the validation loss under the name (sample-quality figures need the 28x28 classifier).
  auto eval = dew_run("eval " + run + " --json --samples 0");
  ASSERT_EQ(eval.status, 0) << eval.output;
  auto j = nlohmann::json::parse(eval.output.substr(eval.output.find('{')));
  EXPECT_GT(j.at("val_loss").get<double>(), 0.0);
  EXPECT_EQ(j.at("val_loss").get<double>(), j.at("loss").get<double>());
  EXPECT_EQ(j.at("images").get<double>(), 16.0);  // dew eval reads the whole t10k split (trainer.eval_batches is training's)
}

// The other network and processes through the same commands: a UNet on the VP (DDPM) process, which must
// learn (a fresh UNet's zero output predicts eps = 0, loss E[eps^2] = 1; 40 steps on four bright quadrants
// bring the validation loss well below), and a DiT on EDM, sampled with solvers of both families.
TEST(ImageRuns, UNetOnVpLearnsAndDiTOnEdmSamples) {
  Data data;
  TempDir runs;
  const std::string common = " --data " + data.dir.path().string() +
                             " --set trainer.batch_size=16 --set trainer.eval_every=0 --set trainer.device=cpu --set trainer.peak_flops=1"
                             " --set optim.warmup_steps=0 --set preview.per_class=0";
  auto unet = dew_run("train diffusion --out " + (runs / "unet").string() + common +
                      " --set model.kind=unet --set model.base_channels=8 --set model.channel_mult=[1,2]"
                      " --set model.attention_resolutions=[4] --set model.head_channels=8 --set model.groups=4"
                      " --set diffusion.process=vp --set trainer.steps=40 --set optim.learning_rate=2e-3");
  ASSERT_EQ(unet.status, 0) << unet.output;
  auto unet_eval = dew_run("eval " + (runs / "unet").string() + " --json --samples 0");
  ASSERT_EQ(unet_eval.status, 0) << unet_eval.output;
  const double unet_loss = nlohmann::json::parse(unet_eval.output.substr(unet_eval.output.find('{'))).at("val_loss").get<double>();
  EXPECT_LT(unet_loss, 0.8) << unet_eval.output;
  for (const std::string solver : {"ddpm", "pndm", "dpmpp_2m"}) {
    auto s = dew_run("sample " + (runs / "unet").string() + " --out " + (runs / (solver + ".png")).string() +
                     " --n 1 --steps 4 --solver " + solver);
    EXPECT_EQ(s.status, 0) << solver << ": " << s.output;
  }

  auto edm = dew_run("train diffusion --out " + (runs / "edm").string() + common +
                     " --set model.dim=32 --set model.depth=1 --set model.heads=2 --set model.patch_size=2"
                     " --set diffusion.process=edm --set trainer.steps=3");
  ASSERT_EQ(edm.status, 0) << edm.output;
  for (const std::string solver : {"heun", "euler_ancestral", "unipc"}) {
    auto s = dew_run("sample " + (runs / "edm").string() + " --out " + (runs / ("edm-" + solver + ".png")).string() +
                     " --n 1 --steps 4 --solver " + solver);
    EXPECT_EQ(s.status, 0) << solver << ": " << s.output;
    EXPECT_TRUE(fs::exists(runs / ("edm-" + solver + ".png")));
  }
  auto pndm = dew_run("sample " + (runs / "edm").string() + " --out " + (runs / "no.png").string() + " --solver pndm");
  EXPECT_NE(pndm.status, 0);  // pndm is written for vp's discrete schedule only
  EXPECT_NE(pndm.output.find("pndm"), std::string::npos) << pndm.output;
}

// dew train jepa on the quadrant images (8x8, patch 1: an 8x8 grid, room for I-JEPA's default blocks):
// trains, resumes bit for bit (target encoder and mask stream included), evaluates with its collapse
// diagnostics, and is refused by dew sample.
std::string tiny_jepa(const fs::path& data, const fs::path& run, int steps) {
  return "train jepa --data " + data.string() + " --out " + run.string() +
         " --set model.patch_size=1 --set model.dim=16 --set model.depth=1 --set model.heads=2 --set model.predictor_dim=8"
         " --set model.predictor_depth=1 --set model.predictor_heads=2 --set jepa.momentum_steps=6 --set jepa.momentum_start=0.9"
         " --set trainer.batch_size=8 --set trainer.eval_every=0 --set trainer.checkpoint_every=3 --set trainer.device=cpu"
         " --set trainer.peak_flops=1 --set optim.warmup_steps=0 --set optim.decay_steps=6 --set trainer.steps=" + std::to_string(steps);
}

TEST(ImageRuns, JepaTrainsResumesExactlyAndEvaluates) {
  Data data;
  TempDir runs;
  auto straight = dew_run(tiny_jepa(data.dir.path(), runs / "straight", 6));
  ASSERT_EQ(straight.status, 0) << straight.output;
  EXPECT_NE(straight.output.find("effective_rank"), std::string::npos) << straight.output;
  ASSERT_EQ(dew_run(tiny_jepa(data.dir.path(), runs / "stopped", 3)).status, 0);
  auto resumed = dew_run(tiny_jepa(data.dir.path(), runs / "stopped", 6));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  dew::training::Checkpoint a(runs / "straight" / "6"), b(runs / "stopped" / "6");
  ASSERT_GT(a.params().names().size(), 10u);
  for (const auto& name : a.params().names()) EXPECT_TRUE(at::equal(a.params().whole(name), b.params().whole(name))) << name;

  auto eval = dew_run("eval " + (runs / "straight").string() + " --json");
  ASSERT_EQ(eval.status, 0) << eval.output;
  auto j = nlohmann::json::parse(eval.output.substr(eval.output.find('{')));
  EXPECT_GT(j.at("loss").get<double>(), 0.0);
  EXPECT_GT(j.at("target_std").get<double>(), 0.0);
  EXPECT_GT(j.at("effective_rank").get<double>(), 1.0);

  auto sample = dew_run("sample " + (runs / "straight").string() + " --out " + (runs / "x.png").string());
  EXPECT_NE(sample.status, 0);

  // dew probe: the encoder's, a fresh encoder's and the pixels' top-1 on the t10k split. The quadrant classes
  // are separable in pixel space: the pixel kNN is perfect.
  for (const std::string method : {"knn", "linear"}) {
    auto probe = dew_run("probe " + (runs / "straight").string() + " --method " + method + " --json --k 5");
    ASSERT_EQ(probe.status, 0) << probe.output;
    auto p = nlohmann::json::parse(probe.output.substr(probe.output.find('{')));
    EXPECT_EQ(p.at("method"), method);
    for (const char* key : {"top1", "random_init_top1", "pixels_top1"}) {
      EXPECT_GE(p.at(key).get<double>(), 0.0) << key;
      EXPECT_LE(p.at(key).get<double>(), 1.0) << key;
    }
    EXPECT_EQ(p.at("test_images").get<double>(), 16.0);
    if (method == "knn") EXPECT_EQ(p.at("pixels_top1").get<double>(), 1.0) << probe.output;
  }
  // Data without a test split: the probe holds out the run's validation share of the training images.
  const auto train_only = runs / "train-only";
  fs::create_directories(train_only);
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}) fs::copy_file(data.dir.path() / name, train_only / name);
  auto held = dew_run("probe " + (runs / "straight").string() + " --json --k 5 --data " + train_only.string());
  ASSERT_EQ(held.status, 0) << held.output;
  auto h = nlohmann::json::parse(held.output.substr(held.output.find('{')));
  EXPECT_EQ(h.at("test_images").get<double>(), 3.0);  // round(0.05 * 64)
  EXPECT_EQ(h.at("train_images").get<double>(), 61.0);
  EXPECT_NE(h.at("test_split").get<std::string>().find("holdout"), std::string::npos) << held.output;
  EXPECT_EQ(h.at("pixels_top1").get<double>(), 1.0) << held.output;

  auto wrong = dew_run("probe " + (runs / "straight").string() + " --method svm");
  EXPECT_NE(wrong.status, 0);
  EXPECT_NE(wrong.output.find("--method must be knn or linear"), std::string::npos) << wrong.output;

  // The probe during training (jepa.probe_every at evaluations): logged and plotted.
  auto probed = dew_run(tiny_jepa(data.dir.path(), runs / "probed", 4) + " --set trainer.eval_every=2 --set jepa.probe_every=2"
                        " --set jepa.probe_images=32 --set jepa.probe_queries=16");
  ASSERT_EQ(probed.status, 0) << probed.output;
  EXPECT_NE(probed.output.find("probe/knn_top1"), std::string::npos) << probed.output;
  const std::string log = dew::test::read_text(runs / "probed" / "tracking" / "probe.jsonl");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;  // steps 2 and 4
  EXPECT_NE(log.find("\"step\":2"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(runs / "probed" / "tracking" / "probe_knn_top1.png"));
}

TEST(ImageRuns, ClassifierLearnsTheQuadrantsAndRefusesToSample) {
  Data data;
  TempDir runs;
  auto train = dew_run("train classifier --data " + data.dir.path().string() + " --out " + (runs / "c").string() +
                       " --set model.widths=[8,16] --set trainer.steps=40 --set trainer.batch_size=16 --set trainer.eval_every=40"
                       " --set optim.warmup_steps=0 --set trainer.device=cpu --set trainer.peak_flops=1");
  ASSERT_EQ(train.status, 0) << train.output;
  auto eval = dew_run("eval " + (runs / "c").string() + " --json");
  ASSERT_EQ(eval.status, 0) << eval.output;
  auto j = nlohmann::json::parse(eval.output.substr(eval.output.find('{')));
  EXPECT_GT(j.at("accuracy").get<double>(), 0.9) << eval.output;
  EXPECT_EQ(j.at("images").get<double>(), 16.0);

  auto sample = dew_run("sample " + (runs / "c").string() + " --out " + (runs / "x.png").string());
  EXPECT_NE(sample.status, 0);
  EXPECT_NE(sample.output.find("is a classifier run"), std::string::npos) << sample.output;
}

}  // namespace
