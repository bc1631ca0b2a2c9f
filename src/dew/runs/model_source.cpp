#include "dew/runs/model_source.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/interop/gguf_model.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/generation_config.h"
#include "dew/interop/hf_model.h"
#include "dew/runs/hub_cache.h"
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

ModelSourceKind detect_model_source(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (path.extension() == ".gguf") return ModelSourceKind::gguf;
    fail("'", path.string(), "' is a file but not a .gguf file; MODEL is a run directory, a Hugging Face checkpoint "
         "directory (config.json + safetensors) or a .gguf file");
  }
  if (!fs::is_directory(path, ec)) fail("MODEL '", path.string(), "' does not exist");
  if (holds_run(path)) return ModelSourceKind::run;
  if (fs::is_regular_file(path / "config.json", ec)) return ModelSourceKind::hugging_face;
  fail("'", path.string(), "' holds neither run.json (a `dew train` run) nor config.json (a Hugging Face checkpoint); "
       "MODEL is one of those directories or a .gguf file");
}


ModelSource resolve_model_source(const fs::path& model) {
  const fs::path path = resolve_model_argument(model.string());
  ModelSource source{.path = path, .kind = detect_model_source(path), .run = std::nullopt};
  if (source.kind == ModelSourceKind::run) source.run = read_run_file(path);
  return source;
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
      out = find_run_kind(source.run->kind, run_file_path(path).string()).open(path, *source.run)->load_decoder(options);
      if (weights == nn::WeightFormat::bfloat16 && out.model->parameters().front().device().is_cpu())
        nn::quantize_matrices(*out.model, formats::GgmlType::BF16);
      return out;
    }
    case ModelSourceKind::hugging_face: {
      out.generation = interop::read_generation_defaults(path);  // a bad file is refused before the weights load
      auto hf = interop::load_hf_model(path);
      out.model = hf.model;
      out.model_type = hf.model_type;
      out.tokenizer = open_tokenizer(path.string());
      out.description = str("Hugging Face ", hf.model_type, " checkpoint '", path.string(), "'");
      break;
    }
    case ModelSourceKind::gguf: {
      auto gguf = interop::load_gguf_model(path, weights);
      out.model = gguf.model;
      out.model_type = gguf.architecture;
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
