#pragma once
// The flags every command that runs a MODEL shares (generate, chat, export): which model and checkpoint,
// and how to sample from it, declared once so they read and behave the same everywhere.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "dew/inference/sampling.h"
#include "dew/runs/model_source.h"

namespace dew::cli {

struct ModelFlags {
  std::string model;  // run directory, Hugging Face directory or .gguf file
  std::string device;
  std::optional<std::int64_t> step;
  bool live = false;
  // How the weight matrices are held (nn::WeightFormat). float32 unless the command registers --dtype,
  // whose default is native (a GGUF's own quantized types).
  std::string dtype = "float32";
};

// MODEL (positional), --step, --live, when `with_device` --device, and when `with_dtype` --dtype.
void add_model_options(CLI::App* cmd, ModelFlags& flags, bool with_device = true, bool with_dtype = true);
// Uses the available cores, then opens the model (runs::load_model_source).
runs::LoadedModel load_model(const ModelFlags& flags);

// --max-new-tokens, --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --seed.
void add_sampling_options(CLI::App* cmd, inference::Sampling& sampling);
// Refuses sampling flags that make no sense (a dew::Error naming the flag and its value), before the model
// is loaded.
void check_sampling_flags(const inference::Sampling& sampling);

// A check for unsigned options: CLI11 reads "-1" into a uint64 as 2^64 - 1 (strtoull wraps).
std::string refuse_negative(const std::string& value);

}  // namespace dew::cli
