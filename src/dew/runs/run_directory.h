#pragma once
// A run directory, as every `dew train ...` command writes it:
//
//   RUN_DIR/run.json      {"format": "dew-run", "version": 1, "kind": "lm", "tokenizer": "tokenizer/tokenizer.json",
//                          "tokenizer_sha256": "...", "config": {...}}: everything needed to rebuild the model,
//                          objective, data and optimizer
//   RUN_DIR/tokenizer/    the tokenizer the data was written with (absent for the byte tokenizer)
//   RUN_DIR/<step>/       checkpoints (training/checkpoint.h)
//   RUN_DIR/tracking/     scalars.jsonl and plots (telemetry/local_tracker.h)
//
// This file is the envelope only; what `config` holds is the kind's (lm_run.h for "lm").
#include <filesystem>
#include <optional>
#include <string>

#include "dew/core/config.h"

namespace dew::runs {

struct RunFile {
  std::string kind;       // "lm", later "sft", "dpo", ...
  std::string tokenizer;  // load_tokenizer spec relative to the run directory; "byte" for the byte tokenizer
  config::Json config;    // the kind's whole config
  std::string tokenizer_sha256;  // the tokenizer's fingerprint (tokenizer_fingerprint.h); empty in older runs
};

std::filesystem::path run_file_path(const std::filesystem::path& run_dir);  // RUN_DIR/run.json
bool holds_run(const std::filesystem::path& run_dir);                      // run.json exists

// Reads and checks the envelope (format, version, kind, tokenizer, config present with their types).
// Errors name the file and the field.
RunFile read_run_file(const std::filesystem::path& run_dir);
// Writes run.json atomically (temp file, then rename).
void write_run_file(const std::filesystem::path& run_dir, const RunFile& run);

// A fresh run may only go into a missing or empty directory: anything else (a different tool's output, a
// run whose run.json was lost) would be mixed with or overwritten by this one. The error says what to do.
void check_fresh_run_dir(const std::filesystem::path& run_dir);

// The first field, as a dotted path ("model.num_layers"), where two JSON configs differ; nullopt when
// equal. Objects are compared key by key, everything else by value.
std::optional<std::string> first_difference(const config::Json& a, const config::Json& b,
                                            const std::string& prefix = "");

}  // namespace dew::runs
