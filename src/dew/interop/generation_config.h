#pragma once
// The sampling a checkpoint recommends: a Hugging Face directory's generation_config.json, or the
// general.sampling.* keys llama.cpp's converter writes into a GGUF file. `dew generate`, `dew chat` and
// `dew serve` start from these defaults; flags and request fields override them (cli/sampling_defaults.h).
//
// generation_config.json, read the way transformers' GenerationConfig reads it:
//   do_sample            true: sample; false: greedy, whatever temperature says; absent: the command's own
//                        default temperature (greedy for generate and chat, OpenAI's 1 for serve)
//   temperature, top_k, top_p, min_p, repetition_penalty   the filters of inference/sampling.h; with
//                        do_sample true an absent temperature is 1 and an absent top_k is 50, as in
//                        transformers
//   eos_token_id         an id or a list of ids: each ends a continuation
//   max_new_tokens       the token budget; max_length bounds prompt + continuation together
//   bos_token_id, pad_token_id   checked to be ids; they do not change which tokens are drawn
// Known to be inert (bookkeeping, output formats, caches, speculative decoding, beam-only settings):
// kGenerationInertFields in the .cpp. Fields that would change the tokens but that dew's sampler cannot
// express (beam search, typical_p, no_repeat_ngram_size, forced or suppressed tokens, ...) are accepted at
// their neutral value and refused by name otherwise. Any other field is refused by name, as the spec's rule
// for config fields says.
//
// GGUF (llama.cpp's llama_model_meta_key names): general.sampling.temp, top_k, top_p, min_p,
// penalty_repeat are read (temp > 0 means sampling); penalty_last_n must be -1 (the whole context, as dew
// penalizes) or 0 (penalty off); mirostat and xtc_probability are refused unless 0; mirostat_tau,
// mirostat_eta, xtc_threshold (only used by those) and sequence (dew keeps transformers' order) are inert.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dew/formats/gguf_file.h"

namespace dew::interop {

struct GenerationDefaults {
  std::string source;  // the file these came from ("" when there was none)
  // The effective temperature: 0 when the file asks for greedy decoding (do_sample false), unset when
  // do_sample is absent.
  std::optional<double> temperature;
  std::string temperature_reason;  // why, when the temperature is not the file's own number ("do_sample is false")
  std::optional<double> top_p, min_p, repetition_penalty;
  std::optional<std::int64_t> top_k;
  std::string top_k_reason;        // "transformers' default with do_sample true" when the file has none
  std::optional<std::int64_t> max_new_tokens, max_length;
  std::vector<std::int64_t> eos_ids;  // eos_token_id, an int or a list

  bool empty() const { return source.empty(); }
};

// Reads one generation_config.json. Errors name the file, the field, the value and what to do.
GenerationDefaults read_generation_config(const std::filesystem::path& file);
// The general.sampling.* metadata of a GGUF file (source = the file's name); empty() when it has none.
GenerationDefaults read_gguf_sampling(const formats::GgufFile& file);
// For a MODEL path: DIR/generation_config.json when the directory has one, a .gguf file's metadata;
// otherwise none (empty()).
GenerationDefaults read_generation_defaults(const std::filesystem::path& model);

}  // namespace dew::interop
