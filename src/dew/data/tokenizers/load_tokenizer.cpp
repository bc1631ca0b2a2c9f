#include <cstdlib>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/byte_tokenizer.h"
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/data/tokenizers/tokenizer_json.h"

namespace dew::data {
namespace fs = std::filesystem;

fs::path asset_dir() {
  if (const char* env = std::getenv("DEW_ASSETS")) return env;
  return DEW_ASSET_DIR;
}

std::unique_ptr<BpeTokenizer> load_bpe_tokenizer(const std::string& spec) {
  fs::path path = spec;
  if (spec == "gpt2") {
    path = asset_dir() / "tokenizers" / "gpt2" / "tokenizer.json";
    if (!fs::exists(path))
      fail("the bundled gpt2 tokenizer is missing: ", path, " does not exist (set DEW_ASSETS to dew's assets/ directory)");
  }
  std::string name = spec == "gpt2" ? "gpt2" : spec;
  if (fs::is_directory(path)) {
    if (fs::exists(path / "tokenizer.json")) {
      path /= "tokenizer.json";
    } else if (fs::exists(path / "encoder.json") && fs::exists(path / "vocab.bpe")) {
      BpeDefinition definition =
          parse_gpt2_files(read_file(path / "encoder.json"), read_file(path / "vocab.bpe"), path.string());
      return std::make_unique<BpeTokenizer>(std::move(definition), name);
    } else {
      fail("tokenizer directory ", path, " holds neither tokenizer.json nor encoder.json + vocab.bpe");
    }
  }
  if (!fs::is_regular_file(path))
    fail("tokenizer '", spec, "' is not known: use 'byte', 'gpt2', a tokenizer.json file, or a directory with "
         "tokenizer.json or encoder.json + vocab.bpe");
  BpeDefinition definition = parse_tokenizer_json(read_file(path), path.string());
  fs::path config = path.parent_path() / "tokenizer_config.json";
  if (fs::exists(config)) {
    if (auto eos = parse_eos_token(read_file(config), config.string()))
      definition.eos_id = resolve_token(definition, *eos, config.string() + ": eos_token");
  }
  return std::make_unique<BpeTokenizer>(std::move(definition), name);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  fs::path path(spec);
  if (fs::is_directory(path) && fs::exists(path / "tokenizer.txt")) {
    // A directory written by ByteTokenizer::save (for example a dew tokenize output).
    return std::make_unique<ByteTokenizer>();
  }
  return load_bpe_tokenizer(spec);
}

}  // namespace dew::data
