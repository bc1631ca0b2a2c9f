#pragma once
// A row of the run-kind table for a decoder kind: its typed Config (DecoderSections plus the kind's own
// sections, with a fields() list) and its Task (a DecoderTask built from a Config). Everything a row does
// beyond that is the shared decoder life cycle (decoder_run.h).
//
//   std::unique_ptr<RunKind> make_sft_kind() {
//     return std::make_unique<DecoderKind<SFTRunConfig, SFTTask>>("sft", "Supervised fine-tuning ...", "chat JSONL ...");
//   }
#include <memory>
#include <string>

#include "dew/runs/decoder_run.h"
#include "dew/runs/run_kind.h"

namespace dew::runs {

template <class Config, class Task>
class DecoderKind final : public RunKind {
 public:
  DecoderKind(const char* name, const char* summary, const char* data_help, bool needs_init_from = false,
              std::vector<KindFlag> flags = {})
      : name_(name), summary_(summary), data_help_(data_help), needs_init_from_(needs_init_from), flags_(std::move(flags)) {}

  const char* name() const override { return name_; }
  const char* summary() const override { return summary_; }
  const char* data_help() const override { return data_help_; }
  bool needs_init_from() const override { return needs_init_from_; }
  std::vector<KindFlag> flags() const override { return flags_; }
  std::string config_help() const override { return config::describe<Config>(); }

  config::Json load_config(const config::Json& stored, const std::optional<std::filesystem::path>& file,
                           const std::vector<std::string>& overrides) const override {
    Config base;
    if (!stored.is_null()) config::from_json(stored, base, "run.json");
    return config::to_json(config::load<Config>(file, overrides, std::move(base)));
  }

  std::unique_ptr<Run> start(const std::filesystem::path& run_dir, const config::Json& config) const override {
    Config typed;
    config::from_json(config, typed, "the config");
    if (needs_init_from_ && typed.init.from.empty() && !holds_run(run_dir)) {
      fail("`dew train ", name_, "` post-trains a model: pass --init-from MODEL (a run, a Hugging Face directory or a "
           ".gguf file); its tokenizer and chat template read the data");
    }
    return DecoderRun::start(run_dir, std::make_unique<Task>(std::move(typed)));
  }

  std::unique_ptr<Run> open(const std::filesystem::path& run_dir, const RunFile& file) const override {
    Config typed;
    config::from_json(file.config, typed, run_file_path(run_dir).string());
    return DecoderRun::open(run_dir, file, std::make_unique<Task>(std::move(typed)));
  }

 private:
  const char *name_, *summary_, *data_help_;
  bool needs_init_from_;
  std::vector<KindFlag> flags_;
};

// The parts of DecoderTask every Task over a typed Config answers the same way.
template <class Config>
class TypedDecoderTask : public DecoderTask {
 public:
  explicit TypedDecoderTask(Config config) : config_(std::move(config)) {}
  const Config& config() const { return config_; }
  DecoderSections& sections() override { return config_; }
  config::Json config_json() const override { return config::to_json(config_); }
  config::Json canonical_config(const config::Json& stored, const std::string& source) const override {
    Config typed;
    config::from_json(stored, typed, source);
    return config::to_json(typed);
  }

 protected:
  Config config_;
};

}  // namespace dew::runs
