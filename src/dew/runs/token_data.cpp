#include "dew/runs/token_data.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/data/packed_tokens.h"
#include "dew/data/prefetcher.h"
#include "dew/data/token_windows.h"
#include "dew/runs/loader_shard.h"

namespace fs = std::filesystem;

namespace dew::runs {

// data.path names a token directory whose train.bin and val.bin have the size meta.json gives with every id
// inside the vocabulary; packing has documents to pack.
data::TokenMeta check_token_data(TokenDataConfig& d) {
  if (d.path.empty()) fail("data.path is not set: pass --data DIR, a token directory written by `dew tokenize`");
  std::error_code ec;
  if (!fs::is_directory(d.path, ec)) {
    fail("data.path '", d.path, "' is not a directory; pass --data DIR, a token directory written by `dew tokenize`");
  }
  d.path = fs::absolute(d.path).lexically_normal().string();
  const data::TokenMeta meta = data::read_token_meta(d.path);
  {
    const data::TokenFiles files(d.path);  // sizes against meta.json
    files.split(data::Split::train);       // each split's ids against vocab_size
    files.split(data::Split::val);
  }
  if (d.seq_len <= 0) fail("data.seq_len must be positive, got ", d.seq_len);
  if (d.stride < 0) fail("data.stride must be >= 0 (0 = seq_len), got ", d.stride);
  if (d.prefetch < 0) fail("data.prefetch must be >= 0 (0 = none), got ", d.prefetch);
  if (d.pack && d.stride != 0) fail("data.stride applies to windows only; leave it 0 with data.pack = true");
  if (d.pack && !meta.packed) {
    fail("data.pack = true but '", (fs::path(d.path) / "meta.json").string(),
         "' says packed: false (no EOS marks the documents); tokenize with `dew tokenize --pack` or set data.pack=false");
  }
  return meta;
}

std::unique_ptr<data::BatchSource> token_batches(const TokenDataConfig& d, RowShift shift, data::Split split,
                                                 const training::TrainerConfig& trainer) {
  data::TokenLoaderOptions options = loader_options(split, trainer.seed);
  const data::TokenMeta meta = data::read_token_meta(d.path);
  // The loaders cut rows of seq_len + 1 ids; a row without the shift asks them for one id less.
  const std::int64_t loader_len = d.seq_len - 1 + static_cast<std::int64_t>(shift);
  if (loader_len <= 0) fail("data.seq_len must be at least 2 for masked diffusion rows, got ", d.seq_len);
  std::unique_ptr<data::BatchSource> source;
  if (d.pack) {
    if (meta.tokens(split) == 0 && split == data::Split::val) return nullptr;
    source = std::make_unique<data::PackedTokens>(d.path, loader_len, options);
  } else {
    const std::int64_t stride = d.stride > 0 ? d.stride : d.seq_len;
    if (split == data::Split::val && data::TokenWindows::count_windows(meta.val_tokens, loader_len, stride) == 0) {
      return nullptr;
    }
    source = std::make_unique<data::TokenWindows>(d.path, loader_len, stride, options);
  }
  if (split == data::Split::train && d.prefetch > 0) {
    const std::int64_t rows = trainer.process_rows();
    source = std::make_unique<data::Prefetcher>(std::move(source), rows, static_cast<std::size_t>(d.prefetch));
  }
  return source;
}

std::string token_data_tokenizer_sha256(const TokenDataConfig& d) {
  return data::token_tokenizer_sha256(d.path, data::read_token_meta(d.path));
}

std::string token_data_tokenizer_name(const TokenDataConfig& d) {
  const data::TokenMeta meta = data::read_token_meta(d.path);
  return str("'", meta.tokenizer_source, "' (vocabulary ", meta.vocab_size, ")");
}

// Copies the data's tokenizer into the run so that generation and export decode with the vocabulary the
// model learned, even if the token directory is later moved or deleted.
std::string copy_token_data_tokenizer(const TokenDataConfig& d, const fs::path& run_dir) {
  const fs::path data_dir = d.path;
  const data::TokenMeta meta = data::read_token_meta(data_dir);
  if (meta.tokenizer == "byte") return "byte";
  auto tokenizer = data::load_token_tokenizer(data_dir, meta);
  fs::create_directories(run_dir / "tokenizer");
  return (fs::path("tokenizer") / tokenizer->save(run_dir / "tokenizer")).string();
}

std::string describe_token_data(const TokenDataConfig& d) {
  return str("data in '", d.path, "' (", d.pack ? "packed" : "window", " rows of ", d.seq_len, " tokens)");
}

}  // namespace dew::runs
