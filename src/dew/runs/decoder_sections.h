#pragma once
// The config sections every decoder run kind shares (lm, sft, dpo, grpo): where the model starts, its
// architecture, the optimizer and the trainer. A kind's config derives from this and adds its data and
// objective sections (kinds/*.h).
#include <string>

#include "dew/nn/causal_transformer_config.h"
#include "dew/nn/lora.h"
#include "dew/training/optim_config.h"
#include "dew/training/trainer_config.h"

namespace dew::runs {

// Fine-tuning: start from a published or earlier model instead of random weights.
struct InitConfig {
  std::string from;        // a run directory, a Hugging Face checkpoint directory or a .gguf file; "" = random init
  std::string model_type;  // the Hugging Face family of `from` (filled in), used by `dew export`

  template <class V>
  void fields(V& v) {
    v("from", from, "start from this model (run dir, Hugging Face dir or .gguf; --init-from sets it); \"\" = random");
    v("model_type", model_type, "Hugging Face family of init.from (filled in when the run starts)");
  }
};

struct DecoderSections {
  InitConfig init;
  nn::CausalTransformerConfig model;
  nn::LoraConfig lora;  // rank 0 = train every weight; else only adapters train (needs init.from)
  training::OptimConfig optim;
  training::TrainerConfig trainer;

  // A kind's fields(): the shared sections around the kind's own, in the order run.json lists them
  // (init, model, lora, the kind's, optim, trainer), so no kind can leave a shared section out.
  //   template <class V> void fields(V& v) { visit(v, [&] { v("data", data); v("lm", lm); }); }
  template <class V, class Own>
  void visit(V& v, Own own) {
    v("init", init);
    v("model", model);
    v("lora", lora);
    own();
    v("optim", optim);
    v("trainer", trainer);
  }

  // The settings that can be checked without the data or the model it starts from (`--print-config`
  // refuses what training would). A kind with sections of its own hides this with one that adds them.
  void validate_settings() const {
    lora.validate();  // at rank 0 too, as resolve() does: a negative rank is not "no LoRA"
    optim.validate();
    trainer.validate();
  }
};

}  // namespace dew::runs
