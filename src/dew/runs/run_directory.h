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
// This file is the envelope only; what `config` holds is the kind's (run_kind.h lists the kinds; kinds/lm_kind.h is "lm"'s).
#include <filesystem>
#include <optional>
#include <string>

#include "dew/core/config.h"

namespace dew::runs {

struct RunFile {
  std::string kind;       // a row of the run-kind table: "lm", "sft", "dpo", "grpo", "mdlm", "diffusion", ...
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
// The lock file (core/directory_lock.h) does not count: a directory holding only it is empty.
void check_fresh_run_dir(const std::filesystem::path& run_dir);

// Undoes a fresh run that fails before its first checkpoint, so that the corrected command is again a fresh
// run (and not refused as "a different run" because of the run.json the failed one wrote). Create it once
// check_fresh_run_dir has passed, so that everything in the directory is the run's own: the undo removes
// all of it (run.json first, then tokenizer/, tracking/, a kind's own files such as sft's data/, the lock
// file) and, with `created_dir`, the directory itself. keep() once the run is worth keeping. A run with a
// checkpoint is never undone: it holds work.
class FreshRunUndo {
 public:
  FreshRunUndo(std::filesystem::path run_dir, bool created_dir) : dir_(std::move(run_dir)), created_dir_(created_dir) {}
  ~FreshRunUndo();
  FreshRunUndo(const FreshRunUndo&) = delete;
  FreshRunUndo& operator=(const FreshRunUndo&) = delete;
  void keep() { kept_ = true; }

 private:
  std::filesystem::path dir_;
  bool created_dir_;
  bool kept_ = false;
};

// The first field, as a dotted path ("model.num_layers"), where two JSON configs differ; nullopt when
// equal. Objects are compared key by key, everything else by value.
std::optional<std::string> first_difference(const config::Json& a, const config::Json& b,
                                            const std::string& prefix = "");

// A resumed run rebuilds the model, data order and optimizer its checkpoints were made with, so only
// trainer.* may differ between the `stored` config (run.json's, in canonical form) and the `asked` one.
// Refuses the first other difference, naming the field, both values and what to do.
void check_resume_config(const std::filesystem::path& run_dir, config::Json stored, config::Json asked);

}  // namespace dew::runs
