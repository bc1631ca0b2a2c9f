#include "dew/runs/model_source.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/interop/gguf_model.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/generation_config.h"
#include "dew/interop/hf_model.h"
#include "dew/runs/hub_cache.h"
#include "dew/runs/run.h"
#include "dew/runs/run_kind.h"
#include "dew/runs/run_directory.h"
#include "dew/runs/tokenizer_source.h"
#include "dew/nn/device.h"

namespace fs = std::filesystem;

namespace dew::runs {

const char* model_source_kind_name(ModelSourceKind kind) {
  switch (kind) {
    case ModelSourceKind::run: return "run";
    case ModelSourceKind::hugging_face: return "hf";
    case ModelSourceKind::gguf: return "gguf";
  }
  return "?";
}

std::optional<ModelSource> find_model_source(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() != ".gguf") return std::nullopt;
    return ModelSource{.path = path, .kind = ModelSourceKind::gguf, .run = std::nullopt};
  }
  if (!fs::is_directory(path, ec)) return std::nullopt;
  if (holds_run(path)) return ModelSource{.path = path, .kind = ModelSourceKind::run, .run = read_run_file(path)};
  if (fs::is_regular_file(path / "config.json", ec)) {
    return ModelSource{.path = path, .kind = ModelSourceKind::hugging_face, .run = std::nullopt};
  }
  return std::nullopt;
}

ModelSource resolve_model_source(const fs::path& model) {
  // org/name[@revision] that is no path: the checkpoint's snapshot in the local Hub cache.
  const fs::path path = resolve_model_argument(model.string());
  if (auto source = find_model_source(path)) return *std::move(source);
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    fail("'", path.string(), "' is a file but not a .gguf file; MODEL is a run directory, a Hugging Face checkpoint "
         "directory (config.json + safetensors) or a .gguf file");
  }
  if (!fs::is_directory(path, ec)) fail("MODEL '", path.string(), "' does not exist");
  fail("'", path.string(), "' holds neither run.json (a `dew train` run) nor config.json (a Hugging Face checkpoint); "
       "MODEL is one of those directories or a .gguf file");
}

LoadedModel load_model_source(const fs::path& path, const ModelLoadOptions& options) {
  return load_model_source(resolve_model_source(path), options);
}

LoadedModel load_model_source(const ModelSource& source, const ModelLoadOptions& options) {
  const fs::path& path = source.path;
  LoadedModel out;
  out.kind = source.kind;
  if (out.kind != ModelSourceKind::run && (options.live || options.step)) {
    fail("--live and --step apply to run directories; '", path.string(), "' is a ", model_source_kind_name(out.kind),
         " checkpoint");
  }
  const std::string device = options.device.empty() ? "cpu" : options.device;
  // Quantized and bf16 matrices have CPU kernels only: elsewhere the weights are float32.
  const nn::WeightFormat weights = nn::resolve_device(device, "--device").is_cpu() ? options.weights : nn::WeightFormat::float32;
  switch (out.kind) {
    case ModelSourceKind::run: {
      // Whichever kind trained it, opened from the run.json read when the source was resolved.
      out = open_run(source)->load_decoder(options);
      if (weights == nn::WeightFormat::bfloat16 && out.model->parameters().front().device().is_cpu())
        nn::quantize_matrices(*out.model, formats::GgmlType::BF16);
      return out;
    }
    case ModelSourceKind::hugging_face: {
      out.generation = interop::read_generation_defaults(path);  // a bad file is refused before the weights load
      auto hf = interop::load_hf_model(path);
      out.model = hf.model;
      out.model_type = hf.model_type;
      out.tokenizer = open_tokenizer(source);
      out.description = str("Hugging Face ", hf.model_type, " checkpoint '", path.string(), "'");
      break;
    }
    case ModelSourceKind::gguf: {
      auto gguf = interop::load_gguf_model(path, weights);
      out.model = gguf.model;
      out.model_type = gguf.hf_model_type;  // what `dew export` names the family (gemma3 -> gemma3_text)
      out.tokenizer = std::move(gguf.tokenizer);
      out.generation = interop::read_generation_defaults(path);
      out.description = str("GGUF ", gguf.architecture, " model '", path.string(), "'");
      break;
    }
  }
  if (out.kind == ModelSourceKind::hugging_face && weights == nn::WeightFormat::bfloat16)
    nn::quantize_matrices(*out.model, formats::GgmlType::BF16);
  out.model->to(nn::resolve_device(device, "--device"));
  out.model->eval();
  return out;
}

}  // namespace dew::runs
