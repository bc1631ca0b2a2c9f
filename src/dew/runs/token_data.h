#pragma once
// The data section of the kinds that read a token directory written by `dew tokenize` (lm, mdlm): which
// directory, how rows are cut from it, and the checks and batch sources both kinds share. The kinds differ
// only in how many ids a row holds: an autoregressive row holds seq_len + 1 (inputs and shifted targets),
// a masked-diffusion row exactly seq_len (no shift).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "dew/data/batch_source.h"
#include "dew/data/token_files.h"
#include "dew/nn/causal_transformer_config.h"
#include "dew/training/trainer_config.h"

namespace dew::runs {

struct TokenDataConfig {
  std::string path;            // a token directory written by `dew tokenize`
  std::int64_t seq_len = 128;  // tokens the model reads per row
  bool pack = false;           // whole documents packed into rows (needs `dew tokenize --pack`)
  std::int64_t stride = 0;     // windows only: ids between row starts; 0 = seq_len (no overlap)
  std::int64_t prefetch = 4;   // batches prepared ahead on a background thread; 0 = none

  template <class V>
  void fields(V& v) {
    v("path", path, "token directory written by `dew tokenize` (--data sets it)");
    v("seq_len", seq_len, "tokens the model reads per row (an lm row holds seq_len + 1 ids, an mdlm row seq_len)");
    v("pack", pack, "pack whole documents into rows, no attention across them (needs tokenize --pack)");
    v("stride", stride, "ids between the starts of consecutive windows; 0 = seq_len");
    v("prefetch", prefetch, "batches prepared ahead on a background thread; 0 = none");
  }
};

// How many ids a row holds beyond seq_len: 1 for next-token prediction, 0 for masked diffusion.
enum class RowShift : std::int64_t { none = 0, next_token = 1 };

// Checks the directory (sizes against meta.json, every id inside its vocabulary) and the settings; makes
// data.path absolute; returns the data's meta.json.
data::TokenMeta check_token_data(TokenDataConfig& data);
// Batches of one split: windows or packed rows of seq_len + shift ids, prefetched for training; nullptr
// when the validation split is too short for one row.
std::unique_ptr<data::BatchSource> token_batches(const TokenDataConfig& data, RowShift shift, data::Split split,
                                                 const training::TrainerConfig& trainer);
std::string token_data_tokenizer_sha256(const TokenDataConfig& data);
std::string token_data_tokenizer_name(const TokenDataConfig& data);
// Copies the data's tokenizer into the run; returns run.json's tokenizer spec.
std::string copy_token_data_tokenizer(const TokenDataConfig& data, const std::filesystem::path& run_dir);
// "data in '...' (window rows of 128 tokens)".
std::string describe_token_data(const TokenDataConfig& data);

}  // namespace dew::runs
