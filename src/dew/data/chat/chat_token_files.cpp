#include "dew/data/chat/chat_token_files.h"

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/data/chat/chat_role.h"

namespace dew::data {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const char* roles_file_name(Split split) { return split == Split::train ? "train.roles" : "val.roles"; }
const char* offsets_file_name(Split split) { return split == Split::train ? "train.offsets" : "val.offsets"; }

namespace {

std::int64_t count_field(const Json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end()) dew::fail(source, ": field '", key, "' is missing; a chat token directory records it");
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0) {
    dew::fail(source, ": field '", key, "' must be a non-negative integer, got ", it->dump());
  }
  return it->get<std::int64_t>();
}

Json read_meta_json(const fs::path& dir) {
  Json j = config::parse_json_file(dir / "meta.json");
  if (!j.is_object()) dew::fail((dir / "meta.json").string(), ": must hold a JSON object");
  return j;
}

std::vector<std::int64_t> read_offsets(const fs::path& file, std::int64_t conversations, std::int64_t tokens) {
  std::error_code ec;
  if (!fs::exists(file, ec)) dew::fail("'", file.string(), "' does not exist; tokenize the conversations again with `dew tokenize --chat`");
  MappedFile mapped(file);
  const auto expected = static_cast<std::uint64_t>(conversations + 1) * 8;
  if (mapped.size() != expected) {
    dew::fail("'", file.string(), "' has ", mapped.size(), " bytes, expected ", expected, " (", conversations + 1,
              " uint64 offsets for ", conversations, " conversations as meta.json says); tokenize again");
  }
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(conversations + 1));
  for (std::size_t c = 0; c < offsets.size(); ++c) {
    std::uint64_t v = 0;
    for (std::size_t b = 0; b < 8; ++b) v |= static_cast<std::uint64_t>(mapped.data()[c * 8 + b]) << (8 * b);
    offsets[c] = static_cast<std::int64_t>(v);
    const bool bad = c == 0 ? v != 0 : (v > static_cast<std::uint64_t>(tokens) || offsets[c] <= offsets[c - 1]);
    if (bad) {
      dew::fail("'", file.string(), "': offset ", c, " is ", v, "; offsets must start at 0 and increase strictly up to ",
                tokens, " (the split's ids); the directory is damaged: tokenize again");
    }
  }
  if (offsets.back() != tokens) {
    dew::fail("'", file.string(), "': the last offset is ", offsets.back(), ", expected the split's ", tokens, " ids");
  }
  return offsets;
}

MappedFile read_roles(const fs::path& file, std::int64_t tokens) {
  std::error_code ec;
  if (!fs::exists(file, ec)) dew::fail("'", file.string(), "' does not exist; tokenize the conversations again with `dew tokenize --chat`");
  MappedFile mapped(file);
  if (mapped.size() != static_cast<std::uint64_t>(tokens)) {
    dew::fail("'", file.string(), "' has ", mapped.size(), " bytes, expected ", tokens, " (one role per id); tokenize again");
  }
  for (std::size_t i = 0; i < mapped.size(); ++i) {
    if (mapped.data()[i] >= chat_role_count) {
      dew::fail("'", file.string(), "': id ", i, " has role ", static_cast<int>(mapped.data()[i]),
                "; roles are 0-4 (system, user, assistant, tool, template_text): tokenize again");
    }
  }
  return mapped;
}

}  // namespace

bool is_chat_token_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "meta.json", ec)) return false;
  try {
    Json j = read_meta_json(dir);
    auto chat = j.find("chat");
    return chat != j.end() && chat->is_boolean() && chat->get<bool>();
  } catch (const Error&) {
    return false;
  }
}

ChatTokenMeta read_chat_token_meta(const fs::path& dir) {
  ChatTokenMeta meta;
  meta.tokens = read_token_meta(dir);
  const std::string source = (dir / "meta.json").string();
  Json j = read_meta_json(dir);
  auto chat = j.find("chat");
  if (chat == j.end() || !chat->is_boolean() || !chat->get<bool>()) {
    dew::fail(source, ": not a chat token directory (no \"chat\": true); write one with `dew tokenize --chat --input "
              "CONVERSATIONS.jsonl --tokenizer MODEL --out DIR`");
  }
  meta.train_conversations = count_field(j, "train_conversations", source);
  meta.val_conversations = count_field(j, "val_conversations", source);
  const std::int64_t total = count_field(j, "conversations", source);
  if (total != meta.train_conversations + meta.val_conversations) {
    dew::fail(source, ": 'conversations' is ", total, " but train_conversations + val_conversations is ",
              meta.train_conversations + meta.val_conversations);
  }
  return meta;
}

void write_chat_token_meta(const fs::path& dir, const ChatTokenMeta& meta) {
  Json j = Json::parse(meta_to_json_text(meta.tokens));
  j["chat"] = true;
  j["conversations"] = meta.train_conversations + meta.val_conversations;
  j["train_conversations"] = meta.train_conversations;
  j["val_conversations"] = meta.val_conversations;
  write_file_atomic(dir / "meta.json", j.dump(2) + "\n");
}

ChatTokenFiles::ChatTokenFiles(const fs::path& dir) : files_(dir), meta_(read_chat_token_meta(dir)) {
  for (Split s : {Split::train, Split::val}) {
    const std::int64_t tokens = meta_.tokens.tokens(s);
    (s == Split::train ? train_roles_ : val_roles_) = read_roles(dir / roles_file_name(s), tokens);
    (s == Split::train ? train_offsets_ : val_offsets_) = read_offsets(dir / offsets_file_name(s), meta_.conversations(s), tokens);
  }
}

std::span<const std::uint8_t> ChatTokenFiles::roles(Split split) const {
  const MappedFile& m = split == Split::train ? train_roles_ : val_roles_;
  return {m.data(), m.size()};
}

const std::vector<std::int64_t>& ChatTokenFiles::offsets(Split split) const {
  return split == Split::train ? train_offsets_ : val_offsets_;
}

}  // namespace dew::data
