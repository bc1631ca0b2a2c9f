#include <cstdlib>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/byte_tokenizer.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"
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

namespace {

// Any tokenizer.json through the general pipeline, its EOS from tokenizer_config.json when that names one.
std::unique_ptr<Tokenizer> load_pipeline_tokenizer(const fs::path& path, const std::string& name) {
  TokenizerPipeline pipeline = read_tokenizer_pipeline(read_file(path), path.string());
  fs::path config = path.parent_path() / "tokenizer_config.json";
  if (fs::exists(config))
    if (auto eos = parse_eos_token(read_file(config), config.string())) {
      for (const AddedTokenSpec& added : pipeline.added_tokens)
        if (added.content == *eos) pipeline.eos_id = added.id;
      if (!pipeline.eos_id) pipeline.eos_id = pipeline.model->vocabulary().find(*eos);
      if (!pipeline.eos_id)
        fail(config.string(), ": eos_token '", *eos, "' is neither an added token nor a vocabulary token");
    }
  return std::make_unique<PipelineTokenizer>(std::move(pipeline), name);
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  fs::path path(spec);
  if (fs::is_directory(path) && fs::exists(path / "tokenizer.txt")) {
    // A directory written by ByteTokenizer::save (for example a dew tokenize output).
    return std::make_unique<ByteTokenizer>();
  }
  fs::path json_path = fs::is_directory(path) ? path / "tokenizer.json" : path;
  if (spec == "gpt2" || !fs::is_regular_file(json_path)) return load_bpe_tokenizer(spec);
  // Byte-level BPE files take the fast path (BpeTokenizer, which also saves and exports to GGUF); whatever
  // that path refuses (normalizers, SentencePiece, Unigram, WordPiece, ...) goes through the general
  // pipeline, whose errors name the component it cannot read.
  try {
    return load_bpe_tokenizer(spec);
  } catch (const Error&) {
  }
  return load_pipeline_tokenizer(json_path, spec);
}

}  // namespace dew::data
