// `dew generate MODEL --prompt TEXT`: continue prompts with a model (a run directory: the EMA weights unless
// --live; a Hugging Face checkpoint directory; a GGUF file), encoding and decoding with the model's own
// tokenizer (BOS added where the tokenizer asks for it). Greedy unless --temperature > 0.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/cli/commands.h"
#include "dew/cli/torch_threads.h"
#include "dew/core/error.h"
#include "dew/inference/generate.h"
#include "dew/runs/model_source.h"

namespace dew::cli {

namespace {
struct GenerateFlags {
  std::string model, device;
  std::vector<std::string> prompts;
  std::optional<std::int64_t> step;
  inference::Sampling sampling{.temperature = 0.0};
  bool live = false, json = false, no_eos = false;
};
}  // namespace

void add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  auto& s = flags->sampling;
  auto* cmd = app.add_subcommand("generate", "Continue text with a model (a run, a Hugging Face directory or a GGUF file)");
  cmd->add_option("model", flags->model, "run directory, Hugging Face checkpoint directory, or .gguf file")->required();
  cmd->add_option("--prompt", flags->prompts, "text to continue (repeatable: prompts are generated as one batch)")
      ->required();
  cmd->add_option("--max-new-tokens", s.max_new_tokens, "most tokens generated per continuation (64)");
  cmd->add_option("--temperature", s.temperature, "softmax temperature; 0 = greedy (the default)");
  cmd->add_option("--top-k", s.top_k, "keep only the k most likely tokens; 0 = off");
  cmd->add_option("--top-p", s.top_p, "nucleus sampling threshold; 1 = off");
  cmd->add_option("--min-p", s.min_p, "drop tokens less likely than min_p times the most likely; 0 = off");
  cmd->add_option("--repetition-penalty", s.repetition_penalty, "penalty on tokens already present; 1 = off");
  cmd->add_option("--n", s.n, "continuations per prompt (1)");
  cmd->add_option("--seed", s.seed, "sampler seed (0)");
  cmd->add_option("--step", flags->step, "checkpoint step to load (default: the newest)");
  cmd->add_option("--device", flags->device, "cpu, cuda, cuda:N (default: the run's trainer.device)");
  cmd->add_flag("--live", flags->live, "use the live weights instead of the EMA copy");
  cmd->add_flag("--no-eos", flags->no_eos, "do not stop at the tokenizer's end-of-text token");
  cmd->add_flag("--json", flags->json, "print one JSON object per continuation (text, tokens, logprobs)");

  cmd->callback([flags] {
    use_available_threads();
    auto loaded = runs::load_model_source(flags->model, {.live = flags->live, .step = flags->step, .device = flags->device});
    const auto& tokenizer = loaded.tokenizer.tokenizer;
    const std::int64_t context = loaded.model->config().max_seq_len;
    inference::Sampling sampling = flags->sampling;
    if (!flags->no_eos) {
      sampling.eos_ids.assign(loaded.tokenizer.stop_ids.begin(), loaded.tokenizer.stop_ids.end());
      if (sampling.eos_ids.empty() && loaded.tokenizer.eos_id) sampling.eos_ids = {*loaded.tokenizer.eos_id};
    }

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
    if (longest + sampling.max_new_tokens > context) {
      const std::int64_t fits = context - longest;
      std::fprintf(stderr, "note: --max-new-tokens %lld lowered to %lld: the longest prompt is %lld tokens and the "
                   "model's context is %lld\n", static_cast<long long>(sampling.max_new_tokens),
                   static_cast<long long>(fits), static_cast<long long>(longest), static_cast<long long>(context));
      sampling.max_new_tokens = fits;
    }

    inference::Generation out = inference::generate(loaded.model, prompts, sampling);
    for (std::int64_t row = 0; row < out.rows(); ++row) {
      const auto& tokens = out.tokens[static_cast<std::size_t>(row)];
      std::vector<data::TokenId> ids(tokens.begin(), tokens.end());
      const std::string prompt = flags->prompts[static_cast<std::size_t>(out.prompt_of(row))];
      if (flags->json) {
        nlohmann::ordered_json j;
        j["prompt"] = prompt;
        j["text"] = tokenizer->decode(ids);
        j["tokens"] = tokens;
        j["logprobs"] = out.logprobs[static_cast<std::size_t>(row)];
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
