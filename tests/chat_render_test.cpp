// Conversations rendered with per-token roles, prompts and preference pairs (src/dew/data/chat/chat_render.h),
// against TRL (fixtures by tools/reference/make_chat_data_fixtures.py; ids are integers, so equality is exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/data/chat/chat_render.h"
#include "dew/runs/tokenizer_source.h"
#include "test_support.h"

namespace {
using namespace dew::data;
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

fs::path chat_fixtures() { return dew::test::fixtures() / "chat_data"; }
Json fixture(const char* name) { return Json::parse(dew::read_file(chat_fixtures() / name)); }
PretrainedTokenizer fixture_tokenizer() { return load_pretrained_tokenizer(chat_fixtures() / "tokenizer"); }

// The rendered text cut where the role changes: (role, text) runs in order.
std::vector<std::pair<ChatRole, std::string>> runs(const PretrainedTokenizer& tok, const RoleTokens& tokens) {
  std::vector<std::pair<ChatRole, std::string>> out;
  for (std::size_t k = 0; k < tokens.ids.size(); ++k) {
    const auto role = static_cast<ChatRole>(tokens.roles[k]);
    std::string text = tok.tokenizer->decode(std::span<const TokenId>(&tokens.ids[k], 1));
    if (out.empty() || out.back().first != role) out.emplace_back(role, "");
    out.back().second += text;
  }
  return out;
}

using Runs = std::vector<std::pair<ChatRole, std::string>>;
constexpr auto S = ChatRole::system, U = ChatRole::user, A = ChatRole::assistant, T = ChatRole::tool,
               X = ChatRole::template_text;

TEST(ChatRender, EveryTokenCarriesItsMessagesRoleAndTheHeaderIsTemplateText) {
  PretrainedTokenizer tok = fixture_tokenizer();
  const Json cases = fixture("masks.json")["templates"]["smollm2"]["cases"];
  RoleTokens tokens = render_conversation(tok, cases[0]["messages"]);
  EXPECT_EQ(runs(tok, tokens), (Runs{{S, "<|im_start|>system\nYou are terse.<|im_end|>\n"},
                                     {U, "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"},
                                     {X, "<|im_start|>assistant\n"},
                                     {A, "Paris.<|im_end|>\n"}}));
  // Without a system message SmolLM2's template writes its default one in front of the first message, as
  // part of that message's rendering: it goes to the user. Tool messages keep their role.
  tokens = render_conversation(tok, cases[2]["messages"]);
  const std::string default_system =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
  EXPECT_EQ(runs(tok, tokens), (Runs{{U, default_system + "<|im_start|>user\nWhat is 12 * 7? Use the tool.<|im_end|>\n"},
                                     {X, "<|im_start|>assistant\n"},
                                     {A, "Calling multiply(12, 7).<|im_end|>\n"},
                                     {T, "<|im_start|>tool\n84<|im_end|>\n<|im_start|>tool\n(checked)<|im_end|>\n"},
                                     {X, "<|im_start|>assistant\n"},
                                     {A, "12 * 7 = 84.<|im_end|>\n"}}));
}

TEST(ChatRender, TemplatesThatAreNotPrefixPreservingSplitAtTheSharedText) {
  // Qwen2.5 closes a run of tool messages (inside one user turn) only after the last: rendering up to the
  // first tool message ends "</tool_response><|im_end|>\n", the whole conversation continues
  // "</tool_response>\n<tool_response>". The shared part is the first tool message's, the rest the second's.
  PretrainedTokenizer tok = fixture_tokenizer();
  const Json section = fixture("masks.json")["templates"]["qwen2_5"];
  tok.chat_template.emplace(section["template"].get<std::string>(), "qwen2_5.jinja");
  RoleTokens tokens = render_conversation(tok, section["cases"][2]["messages"]);
  Runs got = runs(tok, tokens);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[3], (std::pair<ChatRole, std::string>{T, "<|im_start|>user\n<tool_response>\n84\n</tool_response>\n"
                                                          "<tool_response>\n(checked)\n</tool_response><|im_end|>\n"}));
  EXPECT_EQ(got[5], (std::pair<ChatRole, std::string>{A, "12 * 7 = 84.<|im_end|>\n"}));
}

TEST(ChatRender, TextBeforeTheFirstMessageIsTemplateTextOnlyWhenTheConversationStartsWithIt) {
  PretrainedTokenizer tok = fixture_tokenizer();  // bos_token <|im_start|>
  tok.chat_template.emplace("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}", "with_bos");
  RoleTokens tokens = render_conversation(tok, Json::parse(R"([{"role": "user", "content": "hi"},
                                                                {"role": "assistant", "content": "yo"}])"));
  EXPECT_EQ(runs(tok, tokens), (Runs{{X, "<|im_start|>"},
                                     {U, "<|im_start|>user\nhi<|im_end|>\n"},
                                     {X, "<|im_start|>assistant\n"},
                                     {A, "yo<|im_end|>\n"}}));
  // Qwen2.5 renders a default system turn for no messages; a conversation with its own system message does
  // not start with it, so nothing of that turn is template_text.
  const Json section = fixture("masks.json")["templates"]["qwen2_5"];
  tok.chat_template.emplace(section["template"].get<std::string>(), "qwen2_5.jinja");
  tokens = render_conversation(tok, section["cases"][0]["messages"]);
  EXPECT_EQ(runs(tok, tokens).front(), (std::pair<ChatRole, std::string>{S, "<|im_start|>system\nYou are terse.<|im_end|>\n"}));
}

// Our assistant ids against TRL's assistant_masks. The one deliberate difference: TRL's ChatML training
// templates open {% generation %} right after "<|im_start|>assistant", so TRL also trains the header's
// newline; dew gives the whole header add_generation_prompt renders to template_text (the template supplies
// it at inference). Everything else (the content, <|im_end|>, the newline after it) must agree exactly.
void expect_trl_mask(PretrainedTokenizer tok, const Json& section, const std::string& name) {
  tok.chat_template.emplace(section["template"].get<std::string>(), name);
  int compared = 0;
  for (const Json& c : section["cases"]) {
    ASSERT_EQ(tok.render_chat(c["messages"], false), c["text"].get<std::string>()) << name;
    RoleTokens tokens = render_conversation(tok, c["messages"]);
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    const auto mask = c["assistant_masks"].get<std::vector<int>>();
    ASSERT_EQ(tokens.ids, ids) << name << ": " << c["text"];
    int headers = 0, differences = 0;
    for (const Json& m : c["messages"]) headers += m["role"] == "assistant";
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const bool ours = tokens.roles[k] == static_cast<std::uint8_t>(ChatRole::assistant);
      if (ours == (mask[k] == 1)) continue;
      ++differences;
      // Only the header's newline, right after "assistant", may differ, and only that way round.
      EXPECT_EQ(mask[k], 1) << name << " token " << k;
      EXPECT_EQ(tokens.roles[k], static_cast<std::uint8_t>(ChatRole::template_text)) << name << " token " << k;
      EXPECT_EQ(tok.tokenizer->decode(std::span<const TokenId>(&ids[k], 1)), "\n") << name << " token " << k;
      const std::string before = tok.tokenizer->decode(std::span<const TokenId>(ids.data(), k));
      const std::string header = "<|im_start|>assistant";
      EXPECT_TRUE(before.size() >= header.size() && before.compare(before.size() - header.size(), header.size(), header) == 0)
          << name << " token " << k << " follows " << before;
    }
    EXPECT_EQ(differences, headers) << name << ": " << c["text"];
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(section["cases"].size())) << name;
  EXPECT_GE(compared, 3) << name;
}

TEST(ChatRender, AssistantIdsMatchTrlsAssistantMaskWithSmolLM2sTemplate) {
  expect_trl_mask(fixture_tokenizer(), fixture("masks.json")["templates"]["smollm2"], "smollm2");
}

TEST(ChatRender, AssistantIdsMatchTrlsOwnQwen25TrainingTemplate) {
  expect_trl_mask(fixture_tokenizer(), fixture("masks.json")["templates"]["qwen2_5"], "qwen2_5");
}

fs::path smollm2_gguf() {
  fs::path models;
  if (const char* m = std::getenv("DEW_MODELS")) models = m;
  else if (const char* c = std::getenv("DEW_CACHE")) models = fs::path(c) / "models";
  else models = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/") / ".cache" / "dew" / "models";
  return models / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(ChatRender, AssistantIdsMatchTrlWithTheRealSmolLM2Tokenizer) {
  if (!fs::exists(smollm2_gguf())) GTEST_SKIP() << smollm2_gguf() << " is absent (scripts/fetch_models.sh fetches it)";
  const Json masks = fixture("masks.json");  // bundled: its section for this model must be there
  ASSERT_TRUE(masks["templates"].contains("smollm2_gguf")) << chat_fixtures() / "masks.json" << " has no smollm2_gguf section";
  expect_trl_mask(dew::runs::open_tokenizer(smollm2_gguf().string()), masks["templates"]["smollm2_gguf"], "smollm2_gguf");
}

TEST(ChatRender, PreferencePairsAndPromptsMatchTrl) {
  PretrainedTokenizer tok = fixture_tokenizer();
  const Json f = fixture("preference.json");
  for (const char* form : {"standard", "conversational"}) {
    const Json& c = f["pairs"][form];
    PreferencePair pair{c["pair"]["prompt"], c["pair"]["chosen"], c["pair"]["rejected"], 1};
    PreferenceTokens got = encode_preference_pair(tok, pair);
    EXPECT_EQ(got.prompt, c["prompt_ids"].get<std::vector<TokenId>>()) << form;
    EXPECT_EQ(got.chosen, c["chosen_ids"].get<std::vector<TokenId>>()) << form;
    EXPECT_EQ(got.rejected, c["rejected_ids"].get<std::vector<TokenId>>()) << form;
    // Standard: the EOS text appended; conversational: the template's <|im_end|>, then its newline.
    ASSERT_GE(got.chosen.size(), 2u);
    EXPECT_EQ(got.chosen[got.chosen.size() - (std::string(form) == "standard" ? 1 : 2)], *tok.eos_id) << form;
  }
  for (const char* form : {"standard", "conversational"}) {
    const Json& c = f["prompts"][form];
    EXPECT_EQ(encode_prompt(tok, c["prompt"]), c["ids"].get<std::vector<TokenId>>()) << form;
  }
  // A standard completion that already ends with the EOS text gets no second one.
  PreferencePair pair{"Q", " yes<|im_end|>", " no", 1};
  PreferenceTokens got = encode_preference_pair(tok, pair);
  EXPECT_EQ(std::count(got.chosen.begin(), got.chosen.end(), *tok.eos_id), 1);
  EXPECT_EQ(std::count(got.rejected.begin(), got.rejected.end(), *tok.eos_id), 1);
}

TEST(ChatRender, ATokenizerWithoutATemplateIsRefusedByName) {
  PretrainedTokenizer tok = fixture_tokenizer();
  tok.chat_template.reset();
  const std::string message = dew::test::error_of([&] {
    render_conversation(tok, Json::parse(R"([{"role": "user", "content": "hi"}])"));
  });
  EXPECT_NE(message.find("has no chat template"), std::string::npos) << message;
}

}  // namespace
