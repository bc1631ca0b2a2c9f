#pragma once
// Whole conversations packed into rows of seq_len + 1 ids, for SFT: no row holds part of a conversation
// beside another, and no attention crosses them (segment ids).
//
// Overlong rule: a conversation longer than a row (seq_len + 1 ids) is truncated to its first seq_len + 1
// ids when those still hold an assistant target (an assistant id after the first, since the first id of a
// row is never a target), and dropped otherwise. Conversations are placed first-fit, in file order, into
// the first row with room. A batch holds
//   text              int64 [rows, seq_len + 1]  ids, 0 in padding
//   text_roles        int64 [rows, seq_len + 1]  ChatRole per id (assistant = 2), template_text (4) in padding
//   text_segment_ids  int64 [rows, seq_len + 1]  1, 2, 3... per conversation in the row, 0 = padding
//   text_positions    int64 [rows, seq_len + 1]  0, 1, 2... restarting at every conversation, 0 in padding
// Rows are the records: shuffled per epoch for training, in order for validation, sharded and resumed
// exactly like PackedTokens (RecordSchedule): set_position(saved) gives the batches an uninterrupted run
// would have read.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "dew/data/batch_source.h"
#include "dew/data/chat/chat_token_files.h"
#include "dew/data/packed_tokens.h"
#include "dew/data/record_order.h"

namespace dew::data {

// What the overlong rule did to a split; the run reports it.
struct ConversationCounts {
  std::int64_t conversations = 0;      // in the split
  std::int64_t kept = 0;               // whole
  std::int64_t truncated = 0;          // cut to one row
  std::int64_t dropped = 0;            // longer than a row with no assistant target in its first row
  std::int64_t without_assistant = 0;  // kept or truncated, yet no assistant target: they add no SFT loss
};

struct ConversationPacking {
  Packing packing;  // rows of pieces (one piece per kept conversation); packing.documents = pieces
  ConversationCounts counts;
};

// The packing alone (no files): `offsets` as ChatTokenFiles::offsets, `roles` one per id.
ConversationPacking pack_conversations(const std::vector<std::int64_t>& offsets, std::span<const std::uint8_t> roles,
                                       std::int64_t row_length);

class PackedConversations : public BatchSource {
 public:
  // `dir` is a chat token directory (dew tokenize --chat). Refused: seq_len < 1, a plain token directory,
  // a split where every conversation is dropped.
  PackedConversations(const std::filesystem::path& dir, std::int64_t seq_len, TokenLoaderOptions options = {});

  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override { return schedule_.position(); }
  void set_position(std::int64_t position) override { schedule_.set_position(position); }
  std::int64_t records() const override { return schedule_.records(); }

  const ChatTokenMeta& meta() const { return files_.meta(); }
  const ConversationCounts& counts() const { return packed_.counts; }
  const Packing& packing() const { return packed_.packing; }
  std::int64_t seq_len() const { return seq_len_; }

 private:
  ChatTokenFiles files_;
  TokenArray ids_;
  std::span<const std::uint8_t> roles_;
  std::int64_t seq_len_;
  ConversationPacking packed_;
  RecordSchedule schedule_;
};

}  // namespace dew::data
