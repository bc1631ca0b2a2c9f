// Chat, preference and prompt JSONL readers (src/dew/data/chat/chat_records.h): good files read with their
// line numbers, and every kind of bad line refused by file, line and field.
#include <gtest/gtest.h>

#include <string>

#include "dew/data/chat/chat_records.h"
#include "test_support.h"

namespace {
using namespace dew::data;
using dew::test::error_of;
using dew::test::TempDir;
using dew::test::write_text;
namespace fs = std::filesystem;

fs::path file_with(const TempDir& dir, const std::string& text) {
  fs::path path = dir / "data.jsonl";
  write_text(path, text);
  return path;
}

TEST(ChatRecords, ReadsConversationsWithTheirLinesSkippingBlankLines) {
  TempDir dir;
  fs::path file = file_with(dir,
      "\xEF\xBB\xBF{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}, "
      "{\"role\": \"assistant\", \"content\": \"Hello.\", \"weight\": 1}]}\r\n"
      "\n   \n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"1\"}]}, "
      "{\"role\": \"tool\", \"content\": \"4\"}], \"id\": 7}\n");
  auto conversations = read_chat_jsonl(file);
  ASSERT_EQ(conversations.size(), 2u);
  EXPECT_EQ(conversations[0].line, 1);
  EXPECT_EQ(conversations[1].line, 4);
  ASSERT_EQ(conversations[0].messages.size(), 3u);
  EXPECT_EQ(conversations[0].messages[2]["content"], "Hello.");
  EXPECT_EQ(conversations[0].messages[2]["weight"], 1);  // other keys travel to the template
  EXPECT_EQ(conversations[1].messages[1].contains("content"), false);
}

TEST(ChatRecords, RefusesEachBadLineByFileLineAndField) {
  TempDir dir;
  const std::string good = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n";
  struct Case {
    std::string line, expected;
  };
  const Case cases[] = {
      {"{\"messages\": [", ":2: not JSON (parse error"},
      {"[1, 2]", ":2: holds [1,2]; each line must hold one JSON object"},
      {"{\"conversation\": []}", ":2: field 'messages' is missing; each line needs {\"messages\""},
      {"{\"messages\": []}", ":2: field 'messages' is an empty list; it needs at least one message"},
      {"{\"messages\": \"hi\"}", ":2: field 'messages' is \"hi\"; expected a list of messages"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, \"b\"]}", ":2: field 'messages[1]' is \"b\"; expected an object"},
      {"{\"messages\": [{\"content\": \"a\"}]}", ":2: field 'messages[0].role' is missing; expected system, user, assistant or tool"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, "
       "{\"role\": \"bot\", \"content\": \"c\"}]}",
       ":2: field 'messages[2].role' is \"bot\"; expected system, user, assistant or tool"},
      {"{\"messages\": [{\"role\": \"template_text\", \"content\": \"a\"}]}", ":2: field 'messages[0].role' is \"template_text\""},
      {"{\"messages\": [{\"role\": 3, \"content\": \"a\"}]}", ":2: field 'messages[0].role' is 3; expected system"},
      {"{\"messages\": [{\"role\": \"user\"}]}", ":2: field 'messages[0].content' is missing; expected a string"},
      {"{\"messages\": [{\"role\": \"user\", \"tool_calls\": []}]}", ":2: field 'messages[0].content' is missing"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}",
       ":2: field 'messages[0].content' is [{\"type\":\"text\"}]; expected a string"},
  };
  for (const Case& c : cases) {
    fs::path file = file_with(dir, good + c.line + "\n" + good);
    const std::string message = error_of([&] { read_chat_jsonl(file); });
    EXPECT_NE(message.find(file.string() + c.expected), std::string::npos) << c.line << "\n" << message;
  }
  EXPECT_NE(error_of([&] { read_chat_jsonl(file_with(dir, "\n\n")); }).find("holds no conversations"), std::string::npos);
  EXPECT_NE(error_of([&] { read_chat_jsonl(dir / "absent.jsonl"); }).find("cannot read '"), std::string::npos);
}

TEST(ChatRecords, LongValuesAreCutInMessages) {
  TempDir dir;
  fs::path file = file_with(dir, "{\"messages\": [{\"role\": \"" + std::string(200, 'x') + "\", \"content\": \"a\"}]}\n");
  const std::string message = error_of([&] { read_chat_jsonl(file); });
  EXPECT_NE(message.find("is \"xxxx"), std::string::npos) << message;
  EXPECT_NE(message.find("...; expected"), std::string::npos) << message;
  EXPECT_LT(message.size(), 200u + file.string().size()) << message;
}

TEST(PreferenceRecords, ReadsStandardAndConversationalPairs) {
  TempDir dir;
  fs::path file = file_with(dir,
      "{\"prompt\": \"The sky is\", \"chosen\": \" blue.\", \"rejected\": \" green.\"}\n"
      "{\"prompt\": [{\"role\": \"user\", \"content\": \"Sky?\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": \"Blue.\"}], "
      "\"rejected\": [{\"role\": \"assistant\", \"content\": \"Green.\"}]}\n");
  auto pairs = read_preference_jsonl(file);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_FALSE(pairs[0].conversational());
  EXPECT_EQ(pairs[0].chosen, " blue.");
  EXPECT_TRUE(pairs[1].conversational());
  EXPECT_EQ(pairs[1].line, 2);
  EXPECT_EQ(pairs[1].rejected[0]["content"], "Green.");
}

TEST(PreferenceRecords, RefusesMissingFieldsMixedFormsAndBadMessages) {
  TempDir dir;
  const std::string msgs = "[{\"role\": \"assistant\", \"content\": \"x\"}]";
  struct Case {
    std::string line, expected;
  };
  const Case cases[] = {
      {"{\"prompt\": \"p\", \"chosen\": \"c\"}", ":1: field 'rejected' is missing; a preference pair needs prompt, chosen and rejected"},
      {"{\"chosen\": \"c\", \"rejected\": \"r\"}", ":1: field 'prompt' is missing"},
      {"{\"prompt\": 5, \"chosen\": \"c\", \"rejected\": \"r\"}", ":1: field 'prompt' is 5; expected a string or a list of messages"},
      {"{\"prompt\": \"p\", \"chosen\": " + msgs + ", \"rejected\": \"r\"}", ":1: field 'chosen' is [{\"role\":\"assistant\""},
      {"{\"prompt\": [{\"role\": \"user\", \"content\": \"p\"}], \"chosen\": " + msgs + ", \"rejected\": \"r\"}",
       ":1: field 'rejected' is \"r\"; expected a list of messages"},
      {"{\"prompt\": [{\"role\": \"user\", \"content\": \"p\"}], \"chosen\": [], \"rejected\": " + msgs + "}",
       ":1: field 'chosen' is an empty list"},
      {"{\"prompt\": [{\"role\": \"human\", \"content\": \"p\"}], \"chosen\": " + msgs + ", \"rejected\": " + msgs + "}",
       ":1: field 'prompt[0].role' is \"human\"; expected system, user, assistant or tool"},
  };
  for (const Case& c : cases) {
    fs::path file = file_with(dir, c.line + "\n");
    const std::string message = error_of([&] { read_preference_jsonl(file); });
    EXPECT_NE(message.find(file.string() + c.expected), std::string::npos) << c.line << "\n" << message;
  }
}

TEST(PromptRecords, ReadsPromptsWithOptionalRewardFields) {
  TempDir dir;
  fs::path file = file_with(dir,
      "{\"prompt\": \"2 + 2 =\", \"ground_truth\": \"4\", \"data_source\": \"arith\", \"extra_info\": {\"split\": \"train\"}}\n"
      "{\"prompt\": [{\"role\": \"user\", \"content\": \"3 * 3?\"}], \"ground_truth\": 9}\n"
      "{\"prompt\": \"no answer\"}\n");
  auto prompts = read_prompt_jsonl(file);
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].ground_truth, "4");
  EXPECT_EQ(prompts[0].data_source, "arith");
  EXPECT_EQ(prompts[0].extra_info["split"], "train");
  EXPECT_TRUE(prompts[1].prompt.is_array());
  EXPECT_EQ(prompts[1].ground_truth, "9");
  EXPECT_TRUE(prompts[1].data_source.is_null());
  EXPECT_EQ(prompts[2].ground_truth, "");
  EXPECT_EQ(prompts[2].line, 3);
}

TEST(PromptRecords, RefusesBadPromptsAndGroundTruths) {
  TempDir dir;
  fs::path file = file_with(dir, "{\"prompt\": \"a\"}\n{\"question\": \"a\"}\n");
  EXPECT_NE(error_of([&] { read_prompt_jsonl(file); }).find(file.string() + ":2: field 'prompt' is missing"), std::string::npos);
  file = file_with(dir, "{\"prompt\": \"a\", \"ground_truth\": [4]}\n");
  EXPECT_NE(error_of([&] { read_prompt_jsonl(file); }).find(file.string() + ":1: field 'ground_truth' is [4]; expected a string or a number"),
            std::string::npos);
  file = file_with(dir, "{\"prompt\": [{\"role\": \"user\", \"content\": null}]}\n");
  EXPECT_NE(error_of([&] { read_prompt_jsonl(file); }).find(file.string() + ":1: field 'prompt[0].content' is null; expected a string"),
            std::string::npos);
}

}  // namespace
