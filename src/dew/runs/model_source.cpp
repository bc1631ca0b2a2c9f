#include "dew/runs/model_source.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/interop/gguf_model.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_model.h"
#include "dew/runs/lm_run.h"
#include "dew/runs/run_directory.h"
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

namespace {
data::PretrainedTokenizer plain_tokenizer(std::unique_ptr<data::Tokenizer> tokenizer) {
  data::PretrainedTokenizer out;
  out.eos_id = tokenizer->eos_id();
  if (out.eos_id) out.stop_ids = {*out.eos_id};
  out.tokenizer = std::move(tokenizer);
  return out;
}

// The tokenizer of a run: a checkpoint's full tokenizer (special tokens, chat template) when the run was
// initialised from one, else the plain tokenizer its data was written with.
data::PretrainedTokenizer run_tokenizer(const LMRun& run) {
  const fs::path dir = run.dir() / "tokenizer";
  std::error_code ec;
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec)) return data::load_pretrained_tokenizer(dir);
  return plain_tokenizer(run.tokenizer());
}
}  // namespace

LoadedModel load_model_source(const fs::path& path, const ModelLoadOptions& options) {
  LoadedModel out;
  out.kind = detect_model_source(path);
  if (out.kind != ModelSourceKind::run && (options.live || options.step)) {
    fail("--live and --step apply to run directories; '", path.string(), "' is a ", model_source_kind_name(out.kind),
         " checkpoint");
  }
  switch (out.kind) {
    case ModelSourceKind::run: {
      LMRun run = LMRun::open(path);
      fs::path checkpoint;
      out.model = run.load_model(options.live, options.step, options.device, &checkpoint);
      out.tokenizer = run_tokenizer(run);
      out.model_type = run.config().init.model_type.empty() ? interop::hf_model_type_for(run.config().model)
                                                            : run.config().init.model_type;
      const bool ema = !options.live && run.config().trainer.ema_decay > 0;
      out.description = str("run '", path.string(), "' checkpoint '", checkpoint.string(), "' (", ema ? "EMA" : "live",
                            " weights)");
      return out;
    }
    case ModelSourceKind::hugging_face: {
      auto hf = interop::load_hf_model(path);
      out.model = hf.model;
      out.model_type = hf.model_type;
      out.tokenizer = data::load_pretrained_tokenizer(path);
      out.description = str("Hugging Face ", hf.model_type, " checkpoint '", path.string(), "'");
      break;
    }
    case ModelSourceKind::gguf: {
      auto gguf = interop::load_gguf_model(path);
      out.model = gguf.model;
      out.model_type = gguf.architecture;
      out.tokenizer = std::move(gguf.tokenizer);
      out.description = str("GGUF ", gguf.architecture, " model '", path.string(), "'");
      break;
    }
  }
  out.model->to(nn::resolve_device(options.device.empty() ? "cpu" : options.device, "--device"));
  out.model->eval();
  return out;
}

}  // namespace dew::runs
