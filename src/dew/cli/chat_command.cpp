// `dew chat MODEL`: answer with the model's chat template. With --prompt, one answer; without, an
// interactive conversation on stdin (one user message per line; /reset starts over, /exit or EOF ends)
// that keeps every turn, dropping the oldest turns (never the system message) when the context is full.
// Sampling as the checkpoint recommends, flags overriding it (cli/sampling_defaults.h).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/cli/commands.h"
#include "dew/cli/model_options.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/cli/decoding.h"
#include "dew/cli/sampling_defaults.h"
#include "dew/runs/model_source.h"

namespace dew::cli {

namespace {
struct ChatFlags {
  ModelFlags model;
  std::string system;
  std::optional<std::string> prompt;  // absent: interactive; given (even empty): one answer
  inference::Sampling sampling{.temperature = 0.0, .max_new_tokens = 256};
  MaskedFlags masked;
  SamplingChoiceFlags choice;
};

class Conversation {
 public:
  Conversation(runs::LoadedModel& loaded, SamplingInForce sampling, const MaskedFlags& masked, const std::string& system)
      : loaded_(loaded), sampling_(std::move(sampling)), masked_(masked) {
    if (!system.empty()) messages_.push_back({{"role", "system"}, {"content", system}});
    system_messages_ = messages_.size();
  }

  void reset() { messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(system_messages_), messages_.end()); }

  std::string answer(const std::string& user) {
    messages_.push_back({{"role", "user"}, {"content", user}});
    const std::int64_t context = loaded_.model->config().max_seq_len;
    std::vector<data::TokenId> ids;
    for (;;) {
      // The template writes the special tokens (BOS, turn markers) itself, so they are encoded as such.
      ids = loaded_.tokenizer.tokenizer->encode(loaded_.tokenizer.render_chat(messages_, /*add_generation_prompt=*/true),
                                                /*allow_special=*/true);
      if (static_cast<std::int64_t>(ids.size()) + 1 <= context) break;
      if (messages_.size() <= system_messages_ + 1) {
        messages_.erase(messages_.size() - 1);
        fail("the message is ", ids.size(), " tokens with the chat template, more than the model's context of ", context,
             " tokens; send a shorter message");
      }
      messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(system_messages_));  // the oldest turn
      std::fprintf(stderr, "note: the conversation outgrew the context (%lld tokens); dropped the oldest message\n",
                   static_cast<long long>(context));
    }
    inference::Sampling sampling = sampling_.sampling;
    const auto length = static_cast<std::int64_t>(ids.size());
    sampling.max_new_tokens = std::min<std::int64_t>(sampling_.budget(length), context - length);
    std::vector<std::vector<std::int32_t>> prompts{{ids.begin(), ids.end()}};
    auto out = continue_prompts(loaded_, prompts, sampling, masked_);
    std::vector<data::TokenId> reply(out.tokens[0].begin(), out.tokens[0].end());
    if (out.stopped_at_eos[0] && !reply.empty()) reply.pop_back();  // the end-of-turn token is not text
    std::string text = loaded_.tokenizer.tokenizer->decode(reply);
    messages_.push_back({{"role", "assistant"}, {"content", text}});
    return text;
  }

 private:
  runs::LoadedModel& loaded_;
  SamplingInForce sampling_;
  MaskedFlags masked_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::size_t system_messages_ = 0;
};
}  // namespace

void add_chat_command(CLI::App& app) {
  auto flags = std::make_shared<ChatFlags>();
  auto* cmd = app.add_subcommand("chat", "Chat with a model through its chat template (a run, a Hugging Face directory or a GGUF file)");
  add_model_options(cmd, flags->model);
  cmd->add_option("--prompt", flags->prompt, "one user message: print the answer and exit (default: interactive on stdin)");
  cmd->add_option("--system", flags->system, "a system message placed first in the conversation");
  add_sampling_options(cmd, flags->sampling);
  add_sampling_choice_options(cmd, flags->choice);
  add_masked_sampling_options(cmd, flags->masked);

  cmd->callback([flags, cmd] {
    check_sampling_flags(flags->sampling);
    if (flags->choice.print) {
      auto checkpoint = read_checkpoint_sampling(flags->model.model);
      auto in_force = sampling_in_force(*cmd, flags->sampling, flags->choice, checkpoint.generation, checkpoint.stop_ids);
      std::printf("%s", describe_sampling(in_force, checkpoint.description).c_str());
      return;
    }
    if (flags->prompt && flags->prompt->empty()) {
      fail("--prompt is empty; give a message, or leave --prompt out to chat interactively");
    }
    exit_on_interrupt();  // writes nothing that needs cleaning up: Ctrl-C ends it at once, even mid-answer
    auto loaded = load_model(flags->model);
    if (!loaded.tokenizer.chat_template) {
      fail("'", flags->model.model, "' has no chat template (", loaded.description,
           "); use `dew generate` to continue plain text");
    }
    Conversation chat(loaded,
                      sampling_in_force(*cmd, flags->sampling, flags->choice,
                                        usable_by(loaded.generation, loaded.model->config().causal), loaded.tokenizer.stop_ids),
                      flags->masked, flags->system);
    if (flags->prompt) {
      std::printf("%s\n", chat.answer(*flags->prompt).c_str());
      return;
    }
    std::fprintf(stderr, "chatting with %s; one message per line, /reset to start over, /exit or Ctrl-D to end\n",
                 loaded.description.c_str());
    std::string line;
    for (;;) {
      std::fprintf(stderr, "> ");
      std::fflush(stderr);
      if (!std::getline(std::cin, line) || line == "/exit") break;
      if (line.empty()) continue;
      if (line == "/reset") {
        chat.reset();
        continue;
      }
      std::printf("%s\n", chat.answer(line).c_str());
      std::fflush(stdout);
    }
  });
}

}  // namespace dew::cli
