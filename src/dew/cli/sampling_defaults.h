#pragma once
// The sampling `dew generate` and `dew chat` use, setting by setting: the flag when it was given, else the
// checkpoint's recommendation (generation_config.json, a GGUF's general.sampling.*; interop/generation_config.h),
// else dew's built-in default. --greedy forces temperature 0 whatever the checkpoint says;
// --print-sampling prints each setting in force and where it came from, and exits without generating.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dew/inference/sampling.h"
#include "dew/interop/generation_config.h"

namespace dew::cli {

struct SamplingChoiceFlags {
  bool greedy = false;
  bool print = false;  // --print-sampling
};

// --greedy and --print-sampling (add_sampling_options declares the settings themselves).
void add_sampling_choice_options(CLI::App* cmd, SamplingChoiceFlags& flags);

struct SamplingSetting {
  std::string name;    // "temperature"
  std::string value;   // "0.7"
  std::string origin;  // "flag --temperature", "/m/generation_config.json", "built-in default"
};

struct SamplingInForce {
  inference::Sampling sampling;
  std::optional<std::int64_t> max_length;  // the checkpoint's bound on prompt + continuation, when it sets one
  std::vector<SamplingSetting> settings;   // in the order --print-sampling shows them

  // The token budget for a prompt of `prompt_tokens`: max_new_tokens, lowered to what max_length leaves.
  // An error naming max_length's file when the prompt alone reaches it.
  std::int64_t budget(std::int64_t prompt_tokens) const;
  std::string max_length_origin;
};

// `parsed` holds the command's built-in defaults overwritten by whatever flags were given; `command` says
// which ones were (a flag counts as given even when its value equals the default). `stop_ids` are the
// tokenizer's (its EOS and generation_config.json's eos_token_id); `no_eos` (--no-eos) drops them.
SamplingInForce sampling_in_force(const CLI::App& command, const inference::Sampling& parsed, const SamplingChoiceFlags& flags,
                                  const interop::GenerationDefaults& checkpoint, const std::vector<std::int32_t>& stop_ids,
                                  bool no_eos = false);

// What a checkpoint says about sampling, read without loading its weights (for --print-sampling): its
// generation defaults and its tokenizer's stop ids.
struct CheckpointSampling {
  interop::GenerationDefaults generation;
  std::vector<std::int32_t> stop_ids;
  std::string description;  // "hf checkpoint '/path'"
};
CheckpointSampling read_checkpoint_sampling(const std::string& model);

// A masked-diffusion model's sampler takes no top-k, top-p, min-p or repetition penalty: the checkpoint's are
// dropped for it (flags asking for them are still refused).
interop::GenerationDefaults usable_by(interop::GenerationDefaults defaults, bool causal);

// "sampling for MODEL:" then one line per setting: name, value, origin.
std::string describe_sampling(const SamplingInForce& in_force, const std::string& model);

}  // namespace dew::cli
