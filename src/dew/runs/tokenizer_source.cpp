#include "dew/runs/tokenizer_source.h"

#include <filesystem>
#include <system_error>

#include "dew/core/error.h"
#include "dew/data/token_files.h"
#include "dew/formats/gguf_file.h"
#include "dew/interop/gguf_model.h"
#include "dew/runs/hub_cache.h"
#include "dew/runs/run_directory.h"

namespace fs = std::filesystem;

namespace dew::runs {

data::PretrainedTokenizer plain_tokenizer(std::unique_ptr<data::Tokenizer> tokenizer) {
  data::PretrainedTokenizer out;
  out.eos_id = tokenizer->eos_id();
  if (out.eos_id) out.stop_ids = {*out.eos_id};
  out.tokenizer = std::move(tokenizer);
  return out;
}

data::PretrainedTokenizer open_run_tokenizer(const fs::path& run_dir, const std::string& spec) {
  if (spec == "byte") return plain_tokenizer(data::load_tokenizer("byte"));
  const fs::path copy = run_dir / spec;
  std::error_code ec;
  if (!fs::exists(copy, ec)) {
    fail("the run's copy of its tokenizer, '", copy.string(), "', is missing (", run_file_path(run_dir).string(),
         " names it); restore the run's tokenizer/ directory, for example from the data it was trained on");
  }
  // A fine-tuning run names its tokenizer directory, a run from scratch the file its data's tokenizer saved.
  const fs::path dir = fs::is_directory(copy, ec) ? copy : copy.parent_path();
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec)) return data::load_pretrained_tokenizer(dir);
  return plain_tokenizer(data::load_tokenizer(copy.string()));
}

namespace {

// A directory of tokenizer files: tokenizer_config.json beside tokenizer.json (a checkpoint's, with its
// special tokens and chat template), else tokenizer.json or GPT-2's encoder.json + vocab.bpe alone.
data::PretrainedTokenizer open_tokenizer_directory(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "tokenizer_config.json", ec)) return data::load_pretrained_tokenizer(dir);
  if (!fs::exists(dir / "tokenizer.json", ec) && !fs::exists(dir / "encoder.json", ec)) {
    fail("directory '", dir.string(), "' holds no tokenizer: expected run.json (a run), meta.json (token data), ",
         "tokenizer.json (a tokenizer or Hugging Face checkpoint) or GPT-2's encoder.json + vocab.bpe");
  }
  return plain_tokenizer(data::load_tokenizer(dir.string()));
}

}  // namespace

data::PretrainedTokenizer open_tokenizer(const ModelSource& source) {
  switch (source.kind) {
    case ModelSourceKind::run:
      // A run keeps a checkpoint's full tokenizer (special tokens, chat template) when it was initialised
      // from one, else the plain tokenizer its data was written with.
      return open_run_tokenizer(source.path, source.run->tokenizer);
    case ModelSourceKind::gguf: return interop::gguf_file_tokenizer(formats::GgufFile(source.path));
    case ModelSourceKind::hugging_face: return open_tokenizer_directory(source.path);
  }
  fail("'", source.path.string(), "': unknown model source kind");
}

data::PretrainedTokenizer open_tokenizer(const std::string& argument) {
  // org/name[@revision] that is no path: the checkpoint's snapshot in the local Hub cache.
  const std::string spec = resolve_model_argument(argument).string();
  const fs::path path = spec;
  if (auto source = find_model_source(path)) return open_tokenizer(*source);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::is_regular_file(path / "meta.json", ec)) {
      return plain_tokenizer(data::load_token_tokenizer(path, data::read_token_meta(path)));
    }
    return open_tokenizer_directory(path);
  }
  // "byte", "gpt2", a tokenizer.json; its errors name the path.
  return plain_tokenizer(data::load_tokenizer(spec));
}

}  // namespace dew::runs
