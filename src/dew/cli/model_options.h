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
};

// MODEL (positional), --step, --live and, when `with_device`, --device.
void add_model_options(CLI::App* cmd, ModelFlags& flags, bool with_device = true);
// Uses the available cores, then opens the model (runs::load_model_source).
runs::LoadedModel load_model(const ModelFlags& flags);

// --max-new-tokens, --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --seed.
void add_sampling_options(CLI::App* cmd, inference::Sampling& sampling);

}  // namespace dew::cli
