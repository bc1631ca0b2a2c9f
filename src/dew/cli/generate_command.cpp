// `dew generate MODEL --prompt TEXT`: continue prompts with a model (a run directory: the EMA weights unless
// --live; a Hugging Face checkpoint directory; a GGUF file), encoding and decoding with the model's own
// tokenizer (BOS added where the tokenizer asks for it). Sampling as the checkpoint's generation_config.json
// (or GGUF metadata) recommends, each flag overriding its setting, greedy when neither asks for sampling
// (cli/sampling_defaults.h; --print-sampling shows what is in force). Masked-diffusion
// models (MDLM runs, LLaDA, Dream) refine the whole continuation with the Unmask sampler (cli/decoding.h).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/cli/commands.h"
#include "dew/cli/decoding.h"
#include "dew/cli/model_options.h"
#include "dew/cli/sampling_defaults.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/inference/generate.h"
#include "dew/runs/model_source.h"

namespace dew::cli {

namespace {
struct GenerateFlags {
  ModelFlags model;
  std::vector<std::string> prompts;
  inference::Sampling sampling{.temperature = 0.0};
  MaskedFlags masked;
  SamplingChoiceFlags choice;
  bool json = false, no_eos = false;
};
}  // namespace

void add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  auto* cmd = app.add_subcommand("generate", "Continue text with a model (a run, a Hugging Face directory or a GGUF file)");
  add_model_options(cmd, flags->model);
  cmd->add_option("--prompt", flags->prompts, "text to continue (repeatable: prompts are generated as one batch)");
  add_sampling_options(cmd, flags->sampling);
  add_sampling_choice_options(cmd, flags->choice);
  cmd->add_option("--n", flags->sampling.n, "continuations per prompt (1)");
  add_masked_sampling_options(cmd, flags->masked);
  cmd->add_flag("--no-eos", flags->no_eos, "do not stop at the tokenizer's end-of-text token");
  cmd->add_flag("--json", flags->json, "print one JSON object per continuation (text, tokens, logprobs)");

  cmd->callback([flags, cmd] {
    if (flags->prompts.empty() && !flags->choice.print) {
      fail("--prompt is required: give the text to continue (or --print-sampling to see the sampling settings)");
    }
    {
      // --max-new-tokens 0 asks a masked-diffusion model for the prompt back and no refinement; whether the
      // model is one is known once it is loaded.
      inference::Sampling checked = flags->sampling;
      if (checked.max_new_tokens == 0) checked.max_new_tokens = 1;
      check_sampling_flags(checked);
    }
    if (flags->choice.print) {
      auto checkpoint = read_checkpoint_sampling(flags->model.model);
      auto in_force = sampling_in_force(*cmd, flags->sampling, flags->choice, checkpoint.generation, checkpoint.stop_ids,
                                        flags->no_eos);
      std::printf("%s", describe_sampling(in_force, checkpoint.description).c_str());
      return;
    }
    exit_on_interrupt();  // writes nothing that needs cleaning up: Ctrl-C ends it at once
    auto loaded = load_model(flags->model);
    if (flags->sampling.max_new_tokens == 0 && loaded.model->config().causal) {
      fail("--max-new-tokens is 0; use at least 1 (0, the prompt back with no refinement, is for masked-diffusion "
           "models only, and ", loaded.description, " is an autoregressive decoder)");
    }
    const auto& tokenizer = loaded.tokenizer.tokenizer;
    const std::int64_t context = loaded.model->config().max_seq_len;
    const auto in_force = sampling_in_force(*cmd, flags->sampling, flags->choice,
                                            usable_by(loaded.generation, loaded.model->config().causal),
                                            loaded.tokenizer.stop_ids, flags->no_eos);
    inference::Sampling sampling = in_force.sampling;

    std::vector<std::vector<std::int32_t>> prompts;
    std::int64_t longest = 0;
    for (std::size_t i = 0; i < flags->prompts.size(); ++i) {
      auto ids = loaded.tokenizer.encode(flags->prompts[i]);
      if (ids.empty()) fail("--prompt ", i + 1, " is empty; give some text to continue");
      if (static_cast<std::int64_t>(ids.size()) >= context) {
        fail("--prompt ", i + 1, " is ", ids.size(), " tokens but the model's context (model.max_seq_len) is ", context,
             " tokens, leaving no room to generate; shorten the prompt");
      }
      longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(ids.size()));
      prompts.emplace_back(ids.begin(), ids.end());
    }
    sampling.max_new_tokens = in_force.budget(longest);
    if (sampling.max_new_tokens > context - longest) {  // (longest + max_new_tokens could overflow)
      const std::int64_t fits = context - longest;
      std::fprintf(stderr, "note: --max-new-tokens %lld lowered to %lld: the longest prompt is %lld tokens and the "
                   "model's context is %lld\n", static_cast<long long>(sampling.max_new_tokens),
                   static_cast<long long>(fits), static_cast<long long>(longest), static_cast<long long>(context));
      sampling.max_new_tokens = fits;
    }

    Continuations out = continue_prompts(loaded, prompts, sampling, flags->masked);
    for (std::int64_t row = 0; row < out.rows(); ++row) {
      const auto& tokens = out.tokens[static_cast<std::size_t>(row)];
      std::vector<data::TokenId> ids(tokens.begin(), tokens.end());
      const std::string prompt = flags->prompts[static_cast<std::size_t>(out.prompt_of(row))];
      if (flags->json) {
        nlohmann::ordered_json j;
        j["prompt"] = prompt;
        j["text"] = tokenizer->decode(ids);
        j["tokens"] = tokens;
        if (out.masked) {
          j["refinements"] = out.refinements[static_cast<std::size_t>(row)];
        } else {
          j["logprobs"] = out.logprobs[static_cast<std::size_t>(row)];
        }
        j["stopped_at_eos"] = static_cast<bool>(out.stopped_at_eos[static_cast<std::size_t>(row)]);
        j["model"] = loaded.description;
        // Decoded text can end inside a UTF-8 sequence (tokens are bytes); JSON gets U+FFFD there.
        std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
      } else {
        // The EOS token is kept in `tokens` for callers; it is not text.
        if (out.stopped_at_eos[static_cast<std::size_t>(row)] && !ids.empty()) ids.pop_back();
        std::printf("%s%s\n", prompt.c_str(), tokenizer->decode(ids).c_str());
        if (out.rows() > 1) std::printf("---\n");
      }
    }
  });
}

}  // namespace dew::cli
