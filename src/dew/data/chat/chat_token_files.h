#pragma once
// A chat token directory: a token directory (token_files.h) whose ids are rendered conversations, plus
// per split which message role each id came from and where each conversation starts:
//
//   meta.json      every token-directory field (packed: false, documents = conversations) plus
//                  "chat": true, "conversations", "train_conversations", "val_conversations"
//   train.bin      ids of the training conversations, one after another (val.bin: validation)
//   train.roles    one byte per id: its ChatRole (chat_role.h)               (val.roles)
//   train.offsets  train_conversations + 1 little-endian uint64: where each conversation starts, then the
//                  id count; end-of-turn ids repeat inside a conversation, so only these tell them apart
//   tokenizer.json, tokenizer_config.json (with the chat template), generation_config.json when needed
//
// TokenFiles and the plain loaders open it as a token directory (they ignore the extra files);
// ChatTokenFiles reads it whole. docs/formats.md describes it.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "dew/core/mapped_file.h"
#include "dew/data/token_files.h"

namespace dew::data {

const char* roles_file_name(Split split);    // "train.roles" | "val.roles"
const char* offsets_file_name(Split split);  // "train.offsets" | "val.offsets"

struct ChatTokenMeta {
  TokenMeta tokens;  // the plain token-directory fields
  std::int64_t train_conversations = 0;
  std::int64_t val_conversations = 0;

  std::int64_t conversations(Split split) const { return split == Split::train ? train_conversations : val_conversations; }
};

// Whether DIR/meta.json says "chat": true (false for a plain token directory or none at all).
bool is_chat_token_directory(const std::filesystem::path& dir);
// Reads meta.json as read_token_meta does, and the chat fields; a plain token directory is refused with
// what to run instead. Errors name the file and the field.
ChatTokenMeta read_chat_token_meta(const std::filesystem::path& dir);
// Writes meta.json atomically: the token-directory fields and the chat fields.
void write_chat_token_meta(const std::filesystem::path& dir, const ChatTokenMeta& meta);

class ChatTokenFiles {
 public:
  // Opens and checks everything: the token files (as TokenFiles), each roles file's size (one byte per id)
  // and values (< 5), each offsets file's size (conversations + 1 values) and values (0 first, strictly
  // increasing, the id count last). Errors name the file, the position and the value.
  explicit ChatTokenFiles(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return files_.dir(); }
  const ChatTokenMeta& meta() const { return meta_; }
  // One split's ids, checked against the vocabulary (TokenFiles::split).
  TokenArray ids(Split split) const { return files_.split(split); }
  std::span<const std::uint8_t> roles(Split split) const;
  // Conversation c of a split is ids [offsets[c], offsets[c + 1]).
  const std::vector<std::int64_t>& offsets(Split split) const;

 private:
  TokenFiles files_;
  ChatTokenMeta meta_;
  MappedFile train_roles_, val_roles_;
  std::vector<std::int64_t> train_offsets_, val_offsets_;
};

}  // namespace dew::data
