#include "dew/cli/sampling_defaults.h"

#include <algorithm>
#include <cstdio>

#include "dew/core/error.h"
#include "dew/runs/model_source.h"
#include "dew/runs/tokenizer_source.h"

namespace dew::cli {

namespace {
constexpr const char* kBuiltIn = "built-in default";

// One setting: the flag's value when it was given, else the checkpoint's, else the built-in one.
template <class T>
void choose(const CLI::App& command, const char* flag, const char* name, T& value, const std::optional<T>& checkpoint,
            const std::string& checkpoint_origin, std::vector<SamplingSetting>& settings) {
  std::string origin = kBuiltIn;
  if (command.count(flag) > 0) {
    origin = std::string("flag ") + flag;
  } else if (checkpoint) {
    value = *checkpoint;
    origin = checkpoint_origin;
  }
  settings.push_back({name, str(value), origin});
}

std::string with_reason(const std::string& source, const std::string& reason) {
  return reason.empty() ? source : source + " (" + reason + ")";
}

std::string joined(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out.empty() ? "(none)" : out;
}
}  // namespace

void add_sampling_choice_options(CLI::App* cmd, SamplingChoiceFlags& flags) {
  cmd->add_flag("--greedy", flags.greedy, "always pick the most likely token (temperature 0), whatever the checkpoint's "
                                          "generation_config.json recommends");
  cmd->add_flag("--print-sampling", flags.print, "print the sampling settings in force and where each came from (flag, "
                                                 "generation_config.json, GGUF metadata, built-in default), then exit");
}

SamplingInForce sampling_in_force(const CLI::App& command, const inference::Sampling& parsed, const SamplingChoiceFlags& flags,
                                  const interop::GenerationDefaults& checkpoint, const std::vector<std::int32_t>& stop_ids,
                                  bool no_eos) {
  if (flags.greedy && command.count("--temperature") > 0 && parsed.temperature != 0.0) {
    fail("--greedy and --temperature ", parsed.temperature, " disagree; give --greedy or a temperature, not both");
  }
  SamplingInForce out;
  out.sampling = parsed;
  auto& s = out.sampling;
  auto& settings = out.settings;
  const std::string& file = checkpoint.source;
  if (flags.greedy) {
    s.temperature = 0.0;
    settings.push_back({"temperature", "0", "flag --greedy"});
  } else {
    choose(command, "--temperature", "temperature", s.temperature, checkpoint.temperature,
           with_reason(file, checkpoint.temperature_reason), settings);
  }
  choose(command, "--top-k", "top_k", s.top_k, checkpoint.top_k, with_reason(file, checkpoint.top_k_reason), settings);
  choose(command, "--top-p", "top_p", s.top_p, checkpoint.top_p, file, settings);
  choose(command, "--min-p", "min_p", s.min_p, checkpoint.min_p, file, settings);
  choose(command, "--repetition-penalty", "repetition_penalty", s.repetition_penalty, checkpoint.repetition_penalty, file,
         settings);
  choose(command, "--max-new-tokens", "max_new_tokens", s.max_new_tokens, checkpoint.max_new_tokens, file, settings);
  // transformers lets max_new_tokens win over max_length; so does an explicit --max-new-tokens here.
  if (checkpoint.max_length && command.count("--max-new-tokens") == 0) {
    out.max_length = checkpoint.max_length;
    out.max_length_origin = file;
    settings.push_back({"max_length", str(*checkpoint.max_length), file + " (bounds prompt + continuation)"});
  }
  if (no_eos) {
    settings.push_back({"eos_ids", "(none)", "flag --no-eos"});
  } else {
    s.eos_ids.assign(stop_ids.begin(), stop_ids.end());
    settings.push_back({"eos_ids", joined(s.eos_ids),
                        checkpoint.eos_ids.empty() ? "the tokenizer's end-of-text token"
                                                   : "the tokenizer's end-of-text token and " + file + " eos_token_id"});
  }
  settings.push_back({"seed", str(s.seed), command.count("--seed") > 0 ? "flag --seed" : kBuiltIn});
  return out;
}

std::int64_t SamplingInForce::budget(std::int64_t prompt_tokens) const {
  if (!max_length) return sampling.max_new_tokens;
  if (prompt_tokens >= *max_length) {
    fail("the prompt is ", prompt_tokens, " tokens, which reaches max_length ", *max_length, " of ", max_length_origin,
         " (prompt + continuation); give --max-new-tokens to generate past it, or shorten the prompt");
  }
  return std::min(sampling.max_new_tokens, *max_length - prompt_tokens);
}

CheckpointSampling read_checkpoint_sampling(const std::string& model) {
  const runs::ModelSource source = runs::resolve_model_source(model);
  CheckpointSampling out;
  if (source.kind != runs::ModelSourceKind::run) out.generation = interop::read_generation_defaults(source.path);
  out.stop_ids = runs::open_tokenizer(source.path.string()).stop_ids;
  out.description = str(runs::model_source_kind_name(source.kind), " '", source.path.string(), "'");
  return out;
}

interop::GenerationDefaults usable_by(interop::GenerationDefaults defaults, bool causal) {
  if (!causal) {
    defaults.top_k.reset();
    defaults.top_p.reset();
    defaults.min_p.reset();
    defaults.repetition_penalty.reset();
  }
  return defaults;
}

std::string describe_sampling(const SamplingInForce& in_force, const std::string& model) {
  std::string out = "sampling for " + model + ":\n";
  for (const auto& setting : in_force.settings) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-19s %-12s ", setting.name.c_str(), setting.value.c_str());
    out += line + setting.origin + "\n";
  }
  return out;
}

}  // namespace dew::cli
