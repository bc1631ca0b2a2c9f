#pragma once
// Conversations, prompts and preference pairs to token ids with a checkpoint's chat template, each
// conversation token carrying the role of the message it came from.
//
// How roles are found (render_conversation): the template renders the whole conversation once, and that
// text is encoded once, so the ids are exactly those of transformers' apply_chat_template(tokenize=True).
// Message i's bytes are where the rendering of messages[0..i] stops agreeing with the whole (the longest
// common prefix), which for the usual prefix-preserving templates is simply render(messages[..i+1]) minus
// render(messages[..i]); for templates that are not (Qwen2.5 closes a run of tool messages only after the
// last one) the shared part goes to the earlier message and the rest to the later one. For an assistant
// message, the text add_generation_prompt renders at that point (the "<|im_start|>assistant\n" header) is
// template_text: at inference the template supplies it, the model never writes it. Text before the first
// message (a BOS the template writes) is template_text too; anything after the last message belongs to it.
// Each id is then decoded to its bytes, and an id is `assistant` when any of its bytes is (as transformers'
// assistant mask marks every token that overlaps a {% generation %} span), else the role of its first byte.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/chat/chat_records.h"
#include "dew/data/chat/chat_role.h"
#include "dew/data/tokenizers/pretrained_tokenizer.h"

namespace dew::data {

struct RoleTokens {
  std::vector<TokenId> ids;
  std::vector<std::uint8_t> roles;  // a ChatRole per id
};

// `messages` as checked by check_messages; `extra` adds template variables (tools, enable_thinking, ...).
// Errors: no chat template, a template error, a tokenizer whose ids do not decode back to the text.
RoleTokens render_conversation(const PretrainedTokenizer& tokenizer, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& extra = {});

// The ids a prompt is given to the model as: a string is encoded as text (BOS first when the tokenizer
// adds one, as transformers' tokenizer(text) does); a message list is rendered with
// add_generation_prompt, so the ids end with the assistant header and the model writes the answer next.
std::vector<TokenId> encode_prompt(const PretrainedTokenizer& tokenizer, const nlohmann::ordered_json& prompt,
                                   const nlohmann::ordered_json& extra = {});

struct PreferenceTokens {
  std::vector<TokenId> prompt, chosen, rejected;
};

// TRL 1.16's DPOTrainer._prepare_dataset rule, followed exactly:
//   standard (strings): the tokenizer's EOS text is appended to chosen and rejected unless they already end
//     with it; prompt, prompt + chosen and prompt + rejected are each encoded as text (BOS as encode_prompt).
//   conversational: prompt rendered with add_generation_prompt; prompt + chosen and prompt + rejected
//     rendered without it, so a completion is what the template writes after the prompt, its end-of-turn
//     (and ChatML's newline after it) included.
//   Then the prompt is cut to the ids it shares with both full sequences (TRL's common_prefix_length, which
//   only differs from the whole prompt when ids merge across the boundary), and chosen / rejected are the
//   rest of each full sequence.
PreferenceTokens encode_preference_pair(const PretrainedTokenizer& tokenizer, const PreferencePair& pair,
                                        const nlohmann::ordered_json& extra = {});

}  // namespace dew::data
