#include "dew/data/chat/packed_conversations.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"
#include "dew/data/chat/chat_role.h"

namespace dew::data {

namespace {

constexpr auto kAssistant = static_cast<std::uint8_t>(ChatRole::assistant);

}  // namespace

ConversationPacking pack_conversations(const std::vector<std::int64_t>& offsets, std::span<const std::uint8_t> roles,
                                       std::int64_t row_length) {
  if (row_length < 2) dew::fail("packed row length ", row_length, " must be at least 2 (seq_len >= 1)");
  ConversationPacking out;
  std::vector<PackedPiece> pieces;
  for (std::size_t c = 0; c + 1 < offsets.size(); ++c) {
    ++out.counts.conversations;
    const std::int64_t start = offsets[c], length = offsets[c + 1] - offsets[c];
    const std::int64_t kept = std::min(length, row_length);
    // An assistant id after the first: a target the LM objective trains on within this row.
    const auto first = roles.begin() + start;
    const bool has_target = std::find(first + 1, first + kept, kAssistant) != first + kept;
    if (length > row_length) {
      if (!has_target) {
        ++out.counts.dropped;
        continue;
      }
      ++out.counts.truncated;
    } else {
      ++out.counts.kept;
      if (!has_target) ++out.counts.without_assistant;
    }
    pieces.push_back({start, kept});
  }
  out.packing = pack_pieces(pieces, row_length);  // one piece per kept conversation
  return out;
}

namespace {

ConversationPacking checked_packing(const ChatTokenFiles& files, Split split, std::int64_t seq_len) {
  if (seq_len < 1) dew::fail("seq_len ", seq_len, " must be at least 1");
  ConversationPacking packed = pack_conversations(files.offsets(split), files.roles(split), seq_len + 1);
  if (packed.packing.rows() < 1) {
    dew::fail("'", (files.dir() / split_file_name(split)).string(), "': none of its ", packed.counts.conversations,
              " conversations fits seq_len ", seq_len, " with an assistant token in its first ", seq_len + 1,
              " ids; raise data.seq_len or shorten the conversations");
  }
  return packed;
}

}  // namespace

PackedConversations::PackedConversations(const std::filesystem::path& dir, std::int64_t seq_len, TokenLoaderOptions options)
    : files_(dir),
      ids_(files_.ids(options.split)),
      roles_(files_.roles(options.split)),
      seq_len_(seq_len),
      packed_(checked_packing(files_, options.split, seq_len)),
      schedule_(packed_.packing.rows(), options.seed, options.shuffled(), options.rank, options.world,
                dew::str("'", ids_.file().string(), "' (conversations packed into rows of seq_len ", seq_len, ")")) {}

Batch PackedConversations::next_batch(std::int64_t rows) {
  std::vector<std::int64_t> records = schedule_.next(rows);
  const std::int64_t width = seq_len_ + 1;
  at::Tensor text = at::zeros({rows, width}, at::kLong);
  at::Tensor roles = at::full({rows, width}, static_cast<std::int64_t>(ChatRole::template_text), at::kLong);
  at::Tensor segments = at::zeros({rows, width}, at::kLong);
  at::Tensor positions = at::zeros({rows, width}, at::kLong);
  std::int64_t* t = text.data_ptr<std::int64_t>();
  std::int64_t* o = roles.data_ptr<std::int64_t>();
  std::int64_t* s = segments.data_ptr<std::int64_t>();
  std::int64_t* p = positions.data_ptr<std::int64_t>();
  const Packing& packing = packed_.packing;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = static_cast<std::size_t>(records[static_cast<std::size_t>(r)]);
    std::int64_t column = r * width;
    std::int64_t segment = 0;
    for (auto k = packing.row_offsets[row]; k < packing.row_offsets[row + 1]; ++k) {
      const PackedPiece& piece = packing.pieces[static_cast<std::size_t>(k)];
      ids_.copy_checked(piece.start, piece.length, t + column, meta().tokens.vocab_size);
      ++segment;
      for (std::int64_t i = 0; i < piece.length; ++i) {
        o[column + i] = roles_[static_cast<std::size_t>(piece.start + i)];
        s[column + i] = segment;
        p[column + i] = i;
      }
      column += piece.length;
    }
  }
  Batch batch;
  batch.set("text", text);
  batch.set("text_roles", roles);
  batch.set("text_segment_ids", segments);
  batch.set("text_positions", positions);
  return batch;
}

}  // namespace dew::data
