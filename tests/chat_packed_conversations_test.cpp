// Chat token directories (tokenize_chat_jsonl, ChatTokenFiles) and PackedConversations: the round trip, the
// validation head, refusals that leave nothing written, the overlong rule's counts, packing without mixed
// conversations, segments/positions/roles, and exact resume.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/data/chat/chat_records.h"
#include "dew/data/chat/chat_render.h"
#include "dew/data/chat/chat_token_files.h"
#include "dew/data/chat/chat_tokenize.h"
#include "dew/data/chat/packed_conversations.h"
#include "dew/data/packed_tokens.h"
#include "dew/data/token_windows.h"
#include "dew/data/tokenize.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"
#include "test_support.h"

namespace {
using namespace dew::data;
using dew::test::error_of;
using dew::test::TempDir;
using dew::test::write_text;
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

PretrainedTokenizer fixture_tokenizer() { return load_pretrained_tokenizer(dew::test::fixtures() / "chat_data" / "tokenizer"); }

std::string conversation_line(const std::string& question, const std::string& answer) {
  return Json{{"messages", Json::array({Json{{"role", "user"}, {"content", question}},
                                        Json{{"role", "assistant"}, {"content", answer}}})}}
             .dump() + "\n";
}

std::vector<std::int64_t> row(const Batch& b, const char* name, std::int64_t r) {
  auto c = b.get(name)[r].contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

TEST(ChatTokenDirectory, RoundTripsConversationsWithRolesOffsetsAndTheTokenizer) {
  TempDir dir;
  PretrainedTokenizer tok = fixture_tokenizer();
  std::string text;
  for (int i = 0; i < 8; ++i) text += conversation_line("Question " + std::to_string(i) + "?", std::string(i + 1, 'a'));
  write_text(dir / "chat.jsonl", text);
  ChatTokenizeSummary s = tokenize_chat_jsonl(dir / "chat.jsonl", tok, dir / "tokens", 0.25, "fixture");
  EXPECT_EQ(s.conversations, 8);
  EXPECT_EQ(s.val_conversations, 2);  // round(0.25 * 8): the first two, in file order
  EXPECT_EQ(s.train_conversations, 6);

  ChatTokenFiles files(dir / "tokens");
  EXPECT_EQ(files.meta().train_conversations, 6);
  EXPECT_EQ(files.meta().val_conversations, 2);
  EXPECT_FALSE(files.meta().tokens.packed);
  EXPECT_EQ(files.meta().tokens.documents, 8);
  EXPECT_EQ(files.meta().tokens.tokenizer_sha256, tokenizer_sha256(*tok.tokenizer));
  EXPECT_EQ(files.meta().tokens.train_tokens, s.train_tokens);
  auto conversations = read_chat_jsonl(dir / "chat.jsonl");
  std::int64_t assistant = 0;
  for (int c = 0; c < 8; ++c) {
    const Split split = c < 2 ? Split::val : Split::train;
    const std::int64_t index = c < 2 ? c : c - 2;
    RoleTokens expected = render_conversation(tok, conversations[static_cast<std::size_t>(c)].messages);
    const auto& offsets = files.offsets(split);
    const std::int64_t start = offsets[static_cast<std::size_t>(index)], end = offsets[static_cast<std::size_t>(index) + 1];
    ASSERT_EQ(end - start, static_cast<std::int64_t>(expected.ids.size())) << c;
    TokenArray ids = files.ids(split);
    for (std::int64_t k = start; k < end; ++k) {
      EXPECT_EQ(ids[k], expected.ids[static_cast<std::size_t>(k - start)]) << c;
      EXPECT_EQ(files.roles(split)[static_cast<std::size_t>(k)], expected.roles[static_cast<std::size_t>(k - start)]) << c;
      assistant += expected.roles[static_cast<std::size_t>(k - start)] == static_cast<std::uint8_t>(ChatRole::assistant);
    }
  }
  EXPECT_EQ(s.assistant_tokens, assistant);
  // The tokenizer travels with its chat template; a plain reader opens the directory as token windows.
  PretrainedTokenizer saved = load_pretrained_tokenizer(dir / "tokens");
  ASSERT_TRUE(saved.chat_template);
  EXPECT_EQ(saved.chat_template->source(), tok.chat_template->source());
  EXPECT_TRUE(is_chat_token_directory(dir / "tokens"));
  TokenLoaderOptions in_order;
  in_order.shuffle = false;
  TokenWindows windows(dir / "tokens", 8, in_order);
  EXPECT_GT(windows.records(), 0);
}

TEST(ChatTokenDirectory, ABadLineIsRefusedByLineAndNothingIsWritten) {
  TempDir dir;
  write_text(dir / "chat.jsonl", conversation_line("a", "b") + "{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}\n");
  const std::string message = error_of([&] { tokenize_chat_jsonl(dir / "chat.jsonl", fixture_tokenizer(), dir / "tokens", 0.0, "fixture"); });
  EXPECT_NE(message.find((dir / "chat.jsonl").string() + ":2: field 'messages[0].role' is \"bot\""), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir / "tokens"));
  // Too many held out; an --out that is someone's data; a tokenizer without a template.
  write_text(dir / "one.jsonl", conversation_line("a", "b"));
  EXPECT_NE(error_of([&] { tokenize_chat_jsonl(dir / "one.jsonl", fixture_tokenizer(), dir / "tokens", 0.6, "f"); })
                .find("leaves none for training"), std::string::npos);
  fs::create_directories(dir / "mine");
  write_text(dir / "mine" / "notes.txt", "keep");
  EXPECT_NE(error_of([&] { tokenize_chat_jsonl(dir / "one.jsonl", fixture_tokenizer(), dir / "mine", 0.0, "f"); })
                .find("is not a token directory"), std::string::npos);
  EXPECT_EQ(dew::read_file(dir / "mine" / "notes.txt"), "keep");
  PretrainedTokenizer bare = fixture_tokenizer();
  bare.chat_template.reset();
  EXPECT_NE(error_of([&] { tokenize_chat_jsonl(dir / "one.jsonl", bare, dir / "tokens", 0.0, "bare"); })
                .find("tokenizer 'bare' has no chat template"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "tokens"));
}

TEST(ChatTokenDirectory, DamagedRolesAndOffsetsAreRefusedByFile) {
  TempDir dir;
  write_text(dir / "chat.jsonl", conversation_line("a", "b") + conversation_line("c", "d"));
  tokenize_chat_jsonl(dir / "chat.jsonl", fixture_tokenizer(), dir / "tokens", 0.0, "fixture");
  const fs::path roles = dir / "tokens" / "train.roles";
  std::string bytes = dew::read_file(roles);
  bytes[3] = 9;
  write_text(roles, bytes);
  EXPECT_NE(error_of([&] { ChatTokenFiles files(dir / "tokens"); }).find("train.roles': id 3 has role 9"), std::string::npos);
  write_text(roles, bytes.substr(1));
  EXPECT_NE(error_of([&] { ChatTokenFiles files(dir / "tokens"); }).find("train.roles' has "), std::string::npos);
  tokenize_chat_jsonl(dir / "chat.jsonl", fixture_tokenizer(), dir / "tokens", 0.0, "fixture");
  const fs::path offsets = dir / "tokens" / "train.offsets";
  bytes = dew::read_file(offsets);
  bytes[8] = 0;  // the second conversation starts where the first does
  write_text(offsets, bytes);
  EXPECT_NE(error_of([&] { ChatTokenFiles files(dir / "tokens"); }).find("train.offsets': offset 1 is "), std::string::npos);
  EXPECT_FALSE(is_chat_token_directory(dir / "nothing"));
}

// A chat directory written by hand, so lengths and roles are exactly what the test says.
struct Conversation {
  std::vector<TokenId> ids;
  std::vector<std::uint8_t> roles;
};

void write_chat_dir(const fs::path& dir, const std::vector<Conversation>& train, const std::vector<Conversation>& val) {
  fs::create_directories(dir);
  ChatTokenMeta meta;
  meta.tokens.tokenizer = "tokenizer.json";
  meta.tokens.tokenizer_source = "test";
  meta.tokens.vocab_size = 256;
  meta.tokens.dtype = TokenDtype::uint8;
  for (Split split : {Split::train, Split::val}) {
    const auto& convs = split == Split::train ? train : val;
    TokenWriter ids(dir / split_file_name(split), TokenDtype::uint8), roles(dir / roles_file_name(split), TokenDtype::uint8);
    std::vector<std::uint8_t> offsets;
    auto offset = [&](std::uint64_t v) {
      for (int b = 0; b < 8; ++b) offsets.push_back(static_cast<std::uint8_t>(v >> (8 * b)));
    };
    offset(0);
    for (const auto& c : convs) {
      ids.write(c.ids);
      roles.write_bytes(c.roles.data(), c.roles.size());
      offset(static_cast<std::uint64_t>(ids.tokens_written()));
    }
    ids.close();
    roles.close();
    TokenWriter out(dir / offsets_file_name(split), TokenDtype::uint8);
    out.write_bytes(offsets.data(), offsets.size());
    out.close();
    (split == Split::train ? meta.tokens.train_tokens : meta.tokens.val_tokens) = ids.tokens_written();
    (split == Split::train ? meta.train_conversations : meta.val_conversations) = static_cast<std::int64_t>(convs.size());
  }
  meta.tokens.documents = meta.train_conversations + meta.val_conversations;
  write_chat_token_meta(dir, meta);
}

// Conversation k: ids 10k, 10k+1, ...; roles spelled with U (user), A (assistant).
Conversation conv(int k, const std::string& roles) {
  Conversation c;
  for (std::size_t i = 0; i < roles.size(); ++i) {
    c.ids.push_back(static_cast<TokenId>(10 * k + static_cast<int>(i)));
    c.roles.push_back(static_cast<std::uint8_t>(roles[i] == 'A' ? ChatRole::assistant : ChatRole::user));
  }
  return c;
}

std::vector<Conversation> seven() {
  return {conv(0, "UUAA"),        // kept
          conv(1, "UAA"),         // kept
          conv(2, "UUAAAAAA"),    // 8 > 6: truncated to its first 6 (assistant targets at 2..5)
          conv(3, "UUUUUUAA"),    // 8 > 6 and no assistant in its first 6: dropped
          conv(4, "UA"),          // kept
          conv(5, "AUUUUUU"),     // 7 > 6, its only assistant id is first (never a target): dropped
          conv(6, "UU")};         // kept, without an assistant target
}

TEST(PackedConversations, PacksWholeConversationsFirstFitWithRolesSegmentsAndPositions) {
  TempDir dir;
  write_chat_dir(dir.path(), seven(), {conv(7, "UA")});
  TokenLoaderOptions in_order;
  in_order.shuffle = false;
  PackedConversations packed(dir.path(), 5, in_order);  // rows of 6
  const ConversationCounts& n = packed.counts();
  EXPECT_EQ(n.conversations, 7);
  EXPECT_EQ(n.kept, 4);
  EXPECT_EQ(n.truncated, 1);
  EXPECT_EQ(n.dropped, 2);
  EXPECT_EQ(n.without_assistant, 1);
  // Pieces c0(4) c1(3) c2(6) c4(2) c6(2), first fit into rows of 6: row0 = c0 + c4, row1 = c1 + c6, row2 = c2.
  ASSERT_EQ(packed.records(), 3);
  Batch b = packed.next_batch(3);
  const std::int64_t P = static_cast<std::int64_t>(ChatRole::template_text), Uu = 1, Aa = 2;
  EXPECT_EQ(row(b, "text", 0), (std::vector<std::int64_t>{0, 1, 2, 3, 40, 41}));
  EXPECT_EQ(row(b, "text_roles", 0), (std::vector<std::int64_t>{Uu, Uu, Aa, Aa, Uu, Aa}));
  EXPECT_EQ(row(b, "text_segment_ids", 0), (std::vector<std::int64_t>{1, 1, 1, 1, 2, 2}));
  EXPECT_EQ(row(b, "text_positions", 0), (std::vector<std::int64_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(row(b, "text", 1), (std::vector<std::int64_t>{10, 11, 12, 60, 61, 0}));
  EXPECT_EQ(row(b, "text_roles", 1), (std::vector<std::int64_t>{Uu, Aa, Aa, Uu, Uu, P}));
  EXPECT_EQ(row(b, "text_segment_ids", 1), (std::vector<std::int64_t>{1, 1, 1, 2, 2, 0}));
  EXPECT_EQ(row(b, "text_positions", 1), (std::vector<std::int64_t>{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(row(b, "text", 2), (std::vector<std::int64_t>{20, 21, 22, 23, 24, 25}));
  EXPECT_EQ(row(b, "text_segment_ids", 2), (std::vector<std::int64_t>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(row(b, "text_positions", 2), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));

  // Every segment is one conversation from its first id: no row holds a piece of one beside another.
  for (std::int64_t r = 0; r < 3; ++r) {
    auto text = row(b, "text", r), seg = row(b, "text_segment_ids", r), pos = row(b, "text_positions", r);
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (seg[i] == 0) continue;
      EXPECT_EQ(text[i] % 10, pos[i]) << "row " << r << " column " << i;  // id 10k + position
      if (i > 0 && seg[i] == seg[i - 1]) {
        EXPECT_EQ(text[i] / 10, text[i - 1] / 10) << "row " << r;
      }
    }
  }
  TokenLoaderOptions val = in_order;
  val.split = Split::val;
  PackedConversations validation(dir.path(), 5, val);
  EXPECT_EQ(validation.counts().conversations, 1);
  EXPECT_EQ(row(validation.next_batch(1), "text", 0), (std::vector<std::int64_t>{70, 71, 0, 0, 0, 0}));
}

TEST(PackedConversations, ResumedPositionGivesTheSameBatches) {
  TempDir dir;
  std::vector<Conversation> convs;
  for (int k = 0; k < 20; ++k) convs.push_back(conv(k, std::string(static_cast<std::size_t>(1 + k % 5), 'U') + "A"));
  write_chat_dir(dir.path(), convs, {});
  TokenLoaderOptions options;
  options.seed = 7;
  PackedConversations first(dir.path(), 7, options);
  ASSERT_GE(first.records(), 4);
  std::vector<Batch> batches;
  for (int i = 0; i < 8; ++i) batches.push_back(first.next_batch(2));
  ASSERT_LT(first.records(), 16);  // so the batches cross into the second epoch
  PackedConversations resumed(dir.path(), 7, options);
  resumed.set_position(4);
  for (int i = 2; i < 8; ++i) {
    Batch b = resumed.next_batch(2);
    for (const char* name : {"text", "text_roles", "text_segment_ids", "text_positions"}) {
      EXPECT_TRUE(at::equal(b.get(name), batches[static_cast<std::size_t>(i)].get(name))) << name << " batch " << i;
    }
  }
  // Shuffled: the first epoch's rows are not simply in order.
  TokenLoaderOptions in_order;
  in_order.shuffle = false;
  PackedConversations ordered(dir.path(), 7, in_order);
  Batch a = ordered.next_batch(first.records());
  PackedConversations shuffled(dir.path(), 7, options);
  EXPECT_FALSE(at::equal(a.get("text"), shuffled.next_batch(first.records()).get("text")));
}

TEST(PackedConversations, RefusesPlainDirectoriesAndSplitsWithNothingToTrain) {
  TempDir dir;
  write_chat_dir(dir / "chat", {conv(3, "UUUUUUAA")}, {});
  const std::string message = error_of([&] { PackedConversations p(dir / "chat", 5); });
  EXPECT_NE(message.find("none of its 1 conversations fits seq_len 5"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { PackedConversations p(dir / "chat", 0); }).find("seq_len 0 must be at least 1"), std::string::npos);
  // Without the overlong rule's drop this conversation would be packed: one row of 8 with seq_len 7.
  PackedConversations long_enough(dir / "chat", 7);
  EXPECT_EQ(long_enough.counts().kept, 1);

  write_text(dir / "c.txt", "plain text for a plain token directory");
  TokenizeConfig config;
  config.input = (dir / "c.txt").string();
  config.out = (dir / "plain").string();
  config.val_fraction = 0.0;
  tokenize_corpus(config);
  EXPECT_NE(error_of([&] { PackedConversations p(dir / "plain", 4); }).find("not a chat token directory"), std::string::npos);
}

}  // namespace
