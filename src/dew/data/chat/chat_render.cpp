#include "dew/data/chat/chat_render.h"

#include <algorithm>
#include <span>
#include <string>

#include "dew/core/error.h"

namespace dew::data {
using Json = nlohmann::ordered_json;

namespace {

std::size_t common_prefix(std::string_view a, std::string_view b) {
  auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<std::size_t>(ia - a.begin());
}

template <class T>
std::size_t common_prefix(const std::vector<T>& a, const std::vector<T>& b) {
  auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<std::size_t>(ia - a.begin());
}

Json head(const Json& messages, std::size_t count) {
  return Json(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(count));
}

// Template text as the model sees it: special tokens written by the template become their ids, and no BOS
// is added (the template writes its own; transformers' apply_chat_template tokenizes the same way).
std::vector<TokenId> encode_rendered(const PretrainedTokenizer& tokenizer, std::string_view text) {
  return tokenizer.tokenizer->encode(text, /*allow_special=*/true);
}

}  // namespace

RoleTokens render_conversation(const PretrainedTokenizer& tokenizer, const Json& messages, const Json& extra) {
  const std::size_t n = messages.size();
  if (!messages.is_array() || n == 0) dew::fail("render_conversation needs a non-empty message list");
  const std::string full = tokenizer.render_chat(messages, /*add_generation_prompt=*/false, extra);
  std::vector<std::uint8_t> byte_role(full.size(), static_cast<std::uint8_t>(ChatRole::template_text));

  // Where message 0 starts: after what the template writes for no message at all (a BOS), when the whole
  // conversation starts with exactly that. Templates that index messages[0] unguarded cannot render an empty
  // list, or render a default system turn that the conversation's own system message replaces; then
  // message 0 starts at the beginning.
  std::size_t start = 0;
  try {
    const std::string empty = tokenizer.render_chat(Json::array(), false, extra);
    if (common_prefix(empty, full) == empty.size()) start = empty.size();
  } catch (const Error&) {
    start = 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t end = i + 1 == n ? full.size()
                                       : std::max(start, common_prefix(tokenizer.render_chat(head(messages, i + 1), false, extra), full));
    const ChatRole role = *message_role(messages[i].at("role").get<std::string>());
    std::size_t body = start;
    if (role == ChatRole::assistant) {
      // The header add_generation_prompt renders after messages[0..i) is the template's, not the message's.
      // (As above, a template may be unable to render no messages; a later prefix's error is real.)
      std::string prompt;
      try {
        prompt = tokenizer.render_chat(head(messages, i), /*add_generation_prompt=*/true, extra);
      } catch (const Error&) {
        if (i > 0) throw;
      }
      if (!prompt.empty() && prompt.size() >= start && prompt.compare(0, start, full, 0, start) == 0) {
        body = std::min(end, start + common_prefix(std::string_view(prompt).substr(start), std::string_view(full).substr(start)));
      }
    }
    std::fill(byte_role.begin() + static_cast<std::ptrdiff_t>(body), byte_role.begin() + static_cast<std::ptrdiff_t>(end),
              static_cast<std::uint8_t>(role));
    start = end;
  }

  RoleTokens out;
  out.ids = encode_rendered(tokenizer, full);
  out.roles.resize(out.ids.size());
  std::size_t offset = 0;
  for (std::size_t k = 0; k < out.ids.size(); ++k) {
    const std::string bytes = tokenizer.tokenizer->decode(std::span<const TokenId>(&out.ids[k], 1));
    if (offset + bytes.size() > full.size() || full.compare(offset, bytes.size(), bytes) != 0) {
      dew::fail("tokenizer '", tokenizer.tokenizer->name(), "': id ", out.ids[k], " (token ", k, " of a rendered "
                "conversation) does not decode to the text it was encoded from, so roles cannot be mapped to ids; "
                "chat data needs a byte-level tokenizer");
    }
    const auto first = byte_role.begin() + static_cast<std::ptrdiff_t>(offset);
    const auto last = first + static_cast<std::ptrdiff_t>(bytes.size());
    const bool assistant = std::find(first, last, static_cast<std::uint8_t>(ChatRole::assistant)) != last;
    out.roles[k] = assistant ? static_cast<std::uint8_t>(ChatRole::assistant)
                             : (bytes.empty() ? static_cast<std::uint8_t>(ChatRole::template_text) : *first);
    offset += bytes.size();
  }
  if (offset != full.size()) {
    dew::fail("tokenizer '", tokenizer.tokenizer->name(), "': the ids of a rendered conversation decode to ", offset,
              " of its ", full.size(), " bytes; chat data needs a byte-level tokenizer");
  }
  return out;
}

std::vector<TokenId> encode_prompt(const PretrainedTokenizer& tokenizer, const Json& prompt, const Json& extra) {
  if (prompt.is_string()) return tokenizer.encode(prompt.get<std::string>());
  return encode_rendered(tokenizer, tokenizer.render_chat(prompt, /*add_generation_prompt=*/true, extra));
}

PreferenceTokens encode_preference_pair(const PretrainedTokenizer& tokenizer, const PreferencePair& pair, const Json& extra) {
  std::vector<TokenId> prompt, chosen, rejected;
  if (pair.conversational()) {
    prompt = encode_prompt(tokenizer, pair.prompt, extra);
    auto full = [&](const Json& completion) {
      Json messages = pair.prompt;
      for (const Json& m : completion) messages.push_back(m);
      return encode_rendered(tokenizer, tokenizer.render_chat(messages, /*add_generation_prompt=*/false, extra));
    };
    chosen = full(pair.chosen);
    rejected = full(pair.rejected);
  } else {
    if (tokenizer.eos_token.empty()) {
      dew::fail("tokenizer '", tokenizer.tokenizer->name(), "' has no EOS token, which standard (string) preference "
                "pairs end with; use a tokenizer with eos_token, or conversational pairs");
    }
    auto with_eos = [&](const Json& completion) {
      std::string text = completion.get<std::string>();
      const std::string& eos = tokenizer.eos_token;
      if (text.size() < eos.size() || text.compare(text.size() - eos.size(), eos.size(), eos) != 0) text += eos;
      return text;
    };
    const std::string p = pair.prompt.get<std::string>();
    prompt = tokenizer.encode(p);
    chosen = tokenizer.encode(p + with_eos(pair.chosen));
    rejected = tokenizer.encode(p + with_eos(pair.rejected));
  }
  const std::size_t shared = std::min(common_prefix(prompt, chosen), common_prefix(prompt, rejected));
  PreferenceTokens out;
  out.prompt.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(shared));
  out.chosen.assign(chosen.begin() + static_cast<std::ptrdiff_t>(shared), chosen.end());
  out.rejected.assign(rejected.begin() + static_cast<std::ptrdiff_t>(shared), rejected.end());
  return out;
}

}  // namespace dew::data
