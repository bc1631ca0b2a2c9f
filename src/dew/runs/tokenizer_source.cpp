#include "dew/runs/tokenizer_source.h"

#include <filesystem>
#include <system_error>

#include "dew/core/error.h"
#include "dew/data/token_files.h"
#include "dew/formats/gguf_file.h"
#include "dew/interop/gguf_model.h"
#include "dew/runs/lm_run.h"
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

data::PretrainedTokenizer open_tokenizer(const std::string& spec) {
  const fs::path path = spec;
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && path.extension() == ".gguf") {
    return interop::gguf_file_tokenizer(formats::GgufFile(path));
  }
  if (fs::is_directory(path, ec)) {
    if (holds_run(path)) {
      // A run keeps a checkpoint's full tokenizer (special tokens, chat template) when it was initialised
      // from one, else the plain tokenizer its data was written with.
      if (fs::is_regular_file(path / "tokenizer" / "tokenizer_config.json", ec)) {
        return data::load_pretrained_tokenizer(path / "tokenizer");
      }
      return plain_tokenizer(LMRun::open(path).tokenizer());
    }
    if (fs::is_regular_file(path / "meta.json", ec)) {
      return plain_tokenizer(data::load_token_tokenizer(path, data::read_token_meta(path)));
    }
    if (fs::is_regular_file(path / "tokenizer_config.json", ec)) return data::load_pretrained_tokenizer(path);
    if (!fs::exists(path / "tokenizer.json", ec) && !fs::exists(path / "encoder.json", ec)) {
      fail("directory '", spec, "' holds no tokenizer: expected run.json (a run), meta.json (token data), ",
           "tokenizer.json (a tokenizer or Hugging Face checkpoint) or GPT-2's encoder.json + vocab.bpe");
    }
  }
  // "byte", "gpt2", a tokenizer.json, a directory of tokenizer files; its errors name the path.
  return plain_tokenizer(data::load_tokenizer(spec));
}

}  // namespace dew::runs
