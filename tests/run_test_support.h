#pragma once
// Helpers for the tests of runs: the tiny decoder run they share, as a config (library tests) and as
// `dew train lm` flags (tests through the binary).
#include <cstdint>
#include <filesystem>

#include "dew/runs/decoder_run.h"
#include "dew/runs/kinds/lm_kind.h"
#include "dew/runs/run_kind.h"
#include "training_test_support.h"

namespace dew::test {

// The tiny decoder on a token directory: 16-token rows, batches of 4, a checkpoint every 4 steps (all
// kept), no evaluation, no start-up matmul measurement, on the CPU.
inline runs::LMRunConfig tiny_lm_run_config(const std::filesystem::path& data, std::int64_t steps) {
  runs::LMRunConfig c;
  c.model = tiny_decoder_config();
  c.model.vocab_size = 0;  // from meta.json
  c.data.path = data.string();
  c.data.seq_len = 16;
  c.trainer.steps = steps;
  c.trainer.batch_size = 4;
  c.trainer.log_every = 100;
  c.trainer.eval_every = 0;
  c.trainer.checkpoint_every = 4;
  c.trainer.keep_checkpoints = 0;
  c.trainer.peak_flops = 1e9;  // skip the start-up matmul measurement
  c.trainer.device = "cpu";
  c.optim.learning_rate = 1e-2;
  return c;
}

// The decoder run in `dir`, opened through the run-kind table as the commands open it.
inline std::unique_ptr<runs::DecoderRun> open_decoder_run(const std::filesystem::path& dir) {
  std::unique_ptr<runs::Run> run = runs::open_run(dir);
  if (!dynamic_cast<runs::DecoderRun*>(run.get())) fail("'", dir.string(), "' is a \"", run->kind(), "\" run, not a decoder run");
  return std::unique_ptr<runs::DecoderRun>(static_cast<runs::DecoderRun*>(run.release()));
}


// `dew train lm` flags for a model of the same scale (appended to --data/--out).
inline constexpr const char* kTinyModelFlags =
    " --set model.emb_features=32 --set model.num_layers=2 --set model.num_heads=4 --set model.mlp_features=48"
    " --set model.max_seq_len=48 --set data.seq_len=24 --set trainer.batch_size=4 --set trainer.log_every=2"
    " --set trainer.eval_every=4 --set trainer.checkpoint_every=4 --set trainer.peak_flops=1e9"
    " --set trainer.device=cpu --set optim.learning_rate=0.01";

}  // namespace dew::test
