#pragma once
// What `dew generate`, `dew chat` and `dew train lm --init-from` accept as MODEL, opened as one thing:
//
//   a run directory      (run.json: `dew train` output; the newest checkpoint, EMA weights unless live)
//   a Hugging Face directory (config.json + model.safetensors or a sharded index, and its tokenizer files)
//   a GGUF file          (*.gguf: weights dequantized, or kept quantized with weights = native;
//                         tokenizer and chat template from its metadata)
//   a Hub name           (org/name[@revision], when no such path exists: the snapshot directory in the local
//                         Hugging Face cache, runs/hub_cache.h; offline, nothing is downloaded)
//
// The model comes back on the requested device in eval mode, with the tokenizer it was trained with.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "dew/interop/generation_config.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/quantized_weights.h"
#include "dew/runs/run_directory.h"

namespace dew::runs {

enum class ModelSourceKind { run, hugging_face, gguf };
const char* model_source_kind_name(ModelSourceKind kind);  // "run", "hf", "gguf"

struct ModelLoadOptions {
  bool live = false;                  // runs: the trained parameters instead of the EMA copy
  std::optional<std::int64_t> step;   // runs: this checkpoint instead of the newest
  std::string device;                 // "" = the run's trainer.device, else cpu for checkpoints
  // How the weight matrices are held. float32 (the default) is what training and export need; native
  // keeps a GGUF's quantized blocks and bfloat16 stores matrices as bf16, both for CPU inference only
  // (on another device they fall back to float32).
  nn::WeightFormat weights = nn::WeightFormat::float32;
};

struct LoadedModel {
  nn::CausalTransformer model{nullptr};
  data::PretrainedTokenizer tokenizer;
  ModelSourceKind kind = ModelSourceKind::run;
  std::string model_type;   // the Hugging Face family to export as ("llama", "qwen3", ...)
  std::string description;  // for logs: which file and checkpoint were read
  // The sampling the checkpoint recommends (generation_config.json, a GGUF's general.sampling.*); empty for
  // runs.
  interop::GenerationDefaults generation;
};

// MODEL resolved once per command: which of the three it is and, for a run, its run.json. The steps after it
// take this value instead of probing the path again: the weights (load_model_source), the tokenizer
// (tokenizer_source.h), the run as its kind (run.h, open_run), and a fine-tuning run's init.from and
// reference models (decoder_task.h, RunContext).
struct ModelSource {
  std::filesystem::path path;
  ModelSourceKind kind = ModelSourceKind::run;
  std::optional<RunFile> run;  // kind run: its run.json, read once
};
// Which of the three `path` is, its run.json read when it is a run; nullopt when it is none of them (the
// caller says what it needed).
std::optional<ModelSource> find_model_source(const std::filesystem::path& path);
// find_model_source, or an error saying what each of the three would need. A Hub name (runs/hub_cache.h)
// becomes its snapshot directory first.
ModelSource resolve_model_source(const std::filesystem::path& path);

LoadedModel load_model_source(const ModelSource& source, const ModelLoadOptions& options = {});
// resolve_model_source, then load.
LoadedModel load_model_source(const std::filesystem::path& path, const ModelLoadOptions& options = {});

}  // namespace dew::runs
