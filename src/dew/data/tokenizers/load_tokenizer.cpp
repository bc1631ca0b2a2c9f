#include <cstdlib>

#include "dew/core/error.h"
#include "dew/data/tokenizers/byte_tokenizer.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {
namespace fs = std::filesystem;

fs::path asset_dir() {
  if (const char* env = std::getenv("DEW_ASSETS")) return env;
  return DEW_ASSET_DIR;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  fs::path path(spec);
  if (fs::is_directory(path) && fs::exists(path / "tokenizer.txt")) {
    // A directory written by ByteTokenizer::save (for example a dew tokenize output).
    return std::make_unique<ByteTokenizer>();
  }
  // BPE tokenizers: added by the byte-level BPE implementation.
  fail("tokenizer '", spec, "' is not known: use 'byte', 'gpt2', a tokenizer.json file, or a directory with "
       "tokenizer.json or encoder.json + vocab.bpe");
}

}  // namespace dew::data
