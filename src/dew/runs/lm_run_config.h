#pragma once
// The config of `dew train lm`: the spec's RunConfig sections for a decoder language model. Every field
// can be set from a --config JSON file or `--set section.field=value`; run.json stores the whole of it.
#include <cstdint>
#include <string>

#include "dew/nn/causal_transformer_config.h"
#include "dew/objectives/lm_objective.h"
#include "dew/training/optim_config.h"
#include "dew/training/trainer_config.h"

namespace dew::runs {

// Which token directory, and how rows are cut from it.
struct LMDataConfig {
  std::string path;            // a token directory written by `dew tokenize`
  std::int64_t seq_len = 128;  // tokens the model reads per row
  bool pack = false;           // whole documents packed into rows (needs `dew tokenize --pack`)
  std::int64_t stride = 0;     // windows only: ids between row starts; 0 = seq_len (no overlap)
  std::int64_t prefetch = 4;   // batches prepared ahead on a background thread; 0 = none

  template <class V>
  void fields(V& v) {
    v("path", path, "token directory written by `dew tokenize` (--data sets it)");
    v("seq_len", seq_len, "tokens the model reads per row (rows hold seq_len + 1 ids)");
    v("pack", pack, "pack whole documents into rows, no attention across them (needs tokenize --pack)");
    v("stride", stride, "ids between the starts of consecutive windows; 0 = seq_len");
    v("prefetch", prefetch, "batches prepared ahead on a background thread; 0 = none");
  }
};

// Fine-tuning: start from a published or earlier model instead of random weights.
struct LMInitConfig {
  std::string from;        // a run directory, a Hugging Face checkpoint directory or a .gguf file; "" = random init
  std::string model_type;  // the Hugging Face family of `from` (filled in), used by `dew export`

  template <class V>
  void fields(V& v) {
    v("from", from, "start from this model (run dir, Hugging Face dir or .gguf; --init-from sets it); \"\" = random");
    v("model_type", model_type, "Hugging Face family of init.from (filled in when the run starts)");
  }
};

// The defaults are a small decoder that trains in minutes on a laptop CPU: 4 layers of 256 features.
struct LMRunConfig {
  nn::CausalTransformerConfig model;
  LMDataConfig data;
  objectives::LMLossConfig lm;  // the objective's own settings; its seq_len is data.seq_len
  training::OptimConfig optim;
  training::TrainerConfig trainer;
  LMInitConfig init;

  template <class V>
  void fields(V& v) {
    v("init", init);
    v("model", model);
    v("data", data);
    v("lm", lm);
    v("optim", optim);
    v("trainer", trainer);
  }

  objectives::LMObjectiveConfig objective_config() const {
    return {.seq_len = data.seq_len, .loss = lm};
  }
};

}  // namespace dew::runs
