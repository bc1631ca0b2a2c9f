// An objective's own state (Objective::state / load_state) travels with the checkpoints: written as
// RUN/<step>/objective.safetensors when non-empty, absent otherwise, and handed back on resume.
#include <gtest/gtest.h>

#include <filesystem>

#include "dew/data/token_windows.h"
#include "dew/objectives/lm_objective.h"
#include "dew/training/checkpoint.h"
#include "dew/training/trainer.h"
#include "training_test_support.h"

namespace {
namespace fs = std::filesystem;
using namespace dew::training;
using dew::objectives::LMObjective;
using dew::test::TempDir;

constexpr std::int64_t kSeqLen = 8;

// An LM objective that counts its loss() calls and remembers the last step, as state a resume must restore.
class CountingObjective final : public dew::objectives::Objective {
 public:
  explicit CountingObjective(bool keep_state) : keep_state_(keep_state) {}
  std::string name() const override { return "counting"; }
  void init(std::uint64_t seed) override { inner_.init(seed); }
  torch::nn::Module& module() override { return inner_.module(); }
  dew::objectives::Loss loss(const dew::data::Batch& batch, std::int64_t step) override {
    ++calls_;
    last_step_ = step;
    return inner_.loss(batch, step);
  }
  dew::objectives::Statistics evaluate(const dew::data::Batch& batch) override { return inner_.evaluate(batch); }
  nlohmann::ordered_json config_json() const override { return inner_.config_json(); }
  std::map<std::string, at::Tensor> state() const override {
    if (!keep_state_) return {};
    return {{"calls", at::full({1}, calls_, at::kLong)}, {"history/last_step", at::full({2, 2}, static_cast<double>(last_step_), at::kFloat)}};
  }
  void load_state(const std::map<std::string, at::Tensor>& state) override {
    ++loads_;
    restored_ = state;
    if (auto it = state.find("calls"); it != state.end()) calls_ = it->second.item<std::int64_t>();
  }

  std::int64_t calls_ = 0, last_step_ = -1, loads_ = 0;
  std::map<std::string, at::Tensor> restored_;

 private:
  bool keep_state_;
  LMObjective inner_{dew::nn::CausalTransformer(dew::test::tiny_decoder_config()), {.seq_len = kSeqLen}};
};

TrainerConfig small_run(std::int64_t steps) {
  TrainerConfig c;
  c.steps = steps;
  c.batch_size = 2;
  c.log_every = 1;
  c.eval_every = 0;
  c.checkpoint_every = 3;
  c.keep_checkpoints = 0;
  c.device = "cpu";
  c.peak_flops = 1e9;  // skip the start-up matmul measurement
  return c;
}

void fit(CountingObjective& objective, const fs::path& data, const fs::path& run, std::int64_t steps) {
  dew::data::TokenWindows source(data, kSeqLen, {.split = dew::data::Split::train, .seed = 3});
  Trainer trainer(objective, {.name = "adamw", .learning_rate = 1e-3}, small_run(steps), run);
  trainer.set_output(nullptr);
  trainer.fit(source);
}

TEST(TrainerObjectiveState, IsSavedWithEachCheckpointAndRestoredOnResume) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  {
    CountingObjective first(/*keep_state=*/true);
    fit(first, data.path(), run.path(), 3);
    EXPECT_EQ(first.loads_, 0);  // a fresh run has nothing to restore
  }
  const fs::path file = run.path() / "3" / "objective.safetensors";
  ASSERT_TRUE(fs::is_regular_file(file));
  Checkpoint opened(run.path() / "3");
  ASSERT_TRUE(opened.objective_state().has_value());
  auto saved = Checkpoint::tensors(*opened.objective_state());
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved.at("calls").item<std::int64_t>(), 3);
  EXPECT_TRUE(saved.at("history/last_step").equal(at::full({2, 2}, 2.0, at::kFloat)));

  CountingObjective resumed(/*keep_state=*/true);
  fit(resumed, data.path(), run.path(), 5);
  EXPECT_EQ(resumed.loads_, 1);
  ASSERT_EQ(resumed.restored_.size(), 2u);
  EXPECT_TRUE(resumed.restored_.at("history/last_step").equal(at::full({2, 2}, 2.0, at::kFloat)));
  EXPECT_EQ(resumed.calls_, 5);  // 3 restored + 2 more steps
  auto final_state = Checkpoint::tensors(*Checkpoint(run.path() / "5").objective_state());
  EXPECT_EQ(final_state.at("calls").item<std::int64_t>(), 5);
}

TEST(TrainerObjectiveState, NoFileWhenTheObjectiveKeepsNoneAndAnEmptyMapOnResume) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  {
    CountingObjective first(/*keep_state=*/false);
    fit(first, data.path(), run.path(), 3);
  }
  EXPECT_FALSE(fs::exists(run.path() / "3" / "objective.safetensors"));
  EXPECT_FALSE(Checkpoint(run.path() / "3").objective_state().has_value());
  CountingObjective resumed(/*keep_state=*/false);
  resumed.calls_ = 100;
  fit(resumed, data.path(), run.path(), 4);
  EXPECT_EQ(resumed.loads_, 1);
  EXPECT_TRUE(resumed.restored_.empty());
  EXPECT_EQ(resumed.calls_, 101);
}

}  // namespace
