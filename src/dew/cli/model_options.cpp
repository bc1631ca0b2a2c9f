#include "dew/cli/model_options.h"

#include "dew/distributed/torch_threads.h"

namespace dew::cli {

void add_model_options(CLI::App* cmd, ModelFlags& flags, bool with_device, bool with_dtype) {
  cmd->add_option("model", flags.model, "run directory, Hugging Face checkpoint directory, or .gguf file")->required();
  cmd->add_option("--step", flags.step, "runs: checkpoint step to load (default: the newest)");
  cmd->add_flag("--live", flags.live, "runs: the live weights instead of the EMA copy");
  if (with_device) cmd->add_option("--device", flags.device, "cpu, cuda, cuda:N (default: a run's trainer.device, else cpu)");
  if (with_dtype) {
    flags.dtype = "native";
    cmd->add_option("--dtype", flags.dtype,
                    "weights in memory on the CPU: native (a GGUF's Q8_0/Q4_0/Q4_1/Q4_K/BF16 kept quantized; the default), "
                    "float32, or bfloat16 (matrices as bf16)")
        ->check(CLI::IsMember({"native", "float32", "bfloat16"}));
  }
}

runs::LoadedModel load_model(const ModelFlags& flags) {
  distributed::use_available_threads();
  return runs::load_model_source(flags.model, {.live = flags.live,
                                              .step = flags.step,
                                              .device = flags.device,
                                              .weights = nn::parse_weight_format(flags.dtype, "--dtype")});
}

void add_sampling_options(CLI::App* cmd, inference::Sampling& s) {
  cmd->add_option("--max-new-tokens", s.max_new_tokens, "most tokens generated per continuation (" +
                                                            std::to_string(s.max_new_tokens) + ")");
  cmd->add_option("--temperature", s.temperature, "softmax temperature; 0 = greedy (the default)");
  cmd->add_option("--top-k", s.top_k, "keep only the k most likely tokens; 0 = off");
  cmd->add_option("--top-p", s.top_p, "nucleus sampling threshold; 1 = off");
  cmd->add_option("--min-p", s.min_p, "drop tokens less likely than min_p times the most likely; 0 = off");
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "penalty on tokens already present; 1 = off");
  cmd->add_option("--seed", s.seed, "sampler seed, 0 to 2^64-1 (0)")->check(refuse_negative);
}

void check_sampling_flags(const inference::Sampling& sampling) {
  sampling.validate(inference::Sampling::Names::flags);
}

std::string refuse_negative(const std::string& value) {
  if (value.find('-') != std::string::npos) return "'" + value + "' is negative; use a number from 0 to 2^64-1";
  return {};
}

}  // namespace dew::cli
