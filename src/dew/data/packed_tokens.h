#pragma once
// Whole documents packed into rows of seq_len + 1 ids, for training without attention across documents.
//
// The split is cut into documents after every EOS id (meta.json's eos_id, written by `dew tokenize --pack`;
// the EOS stays the document's last token, and tokens after the last EOS form a final document). A
// document longer than a row is split into row-sized pieces. Pieces are placed first-fit, in stream order,
// into the first row with room. A batch holds
//   text              int64 [rows, seq_len + 1]  ids, 0 in padding
//   text_segment_ids  int64 [rows, seq_len + 1]  1, 2, 3... for the pieces of a row in order, 0 = padding
//   text_positions    int64 [rows, seq_len + 1]  0, 1, 2... restarting at every piece, 0 in padding
// Rows are the records: shuffled per epoch for training, in order for validation, and sharded and resumed
// like TokenWindows (RecordSchedule).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "dew/data/batch_source.h"
#include "dew/data/record_order.h"
#include "dew/data/token_files.h"

namespace dew::data {

// One contiguous run of ids from the split placed in a row.
struct PackedPiece {
  std::int64_t start;   // first id's index in the split
  std::int64_t length;  // ids
};

// The packing alone (no files): rows as lists of pieces, in placement order.
struct Packing {
  std::vector<std::int64_t> row_offsets;  // row r's pieces are pieces[row_offsets[r] .. row_offsets[r + 1])
  std::vector<PackedPiece> pieces;
  std::int64_t documents = 0;

  std::int64_t rows() const { return static_cast<std::int64_t>(row_offsets.size()) - 1; }
};

// Places pieces (each at most row_length ids) first-fit, in order, into rows of `row_length` ids; within a
// row pieces keep their order. packing.documents = the number of pieces.
Packing pack_pieces(const std::vector<PackedPiece>& pieces, std::int64_t row_length);

// Splits `ids` at `eos_id` and packs first-fit into rows of `row_length` ids.
Packing pack_documents(const TokenArray& ids, std::int64_t eos_id, std::int64_t row_length);

class PackedTokens : public BatchSource {
 public:
  PackedTokens(const std::filesystem::path& dir, std::int64_t seq_len, TokenLoaderOptions options = {});

  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override { return schedule_.position(); }
  void set_position(std::int64_t position) override { schedule_.set_position(position); }
  std::int64_t records() const override { return schedule_.records(); }

  const TokenMeta& meta() const { return files_.meta(); }
  const Packing& packing() const { return packing_; }
  std::int64_t seq_len() const { return seq_len_; }

 private:
  PackedTokens(TokenFiles files, std::int64_t seq_len, TokenLoaderOptions options);
  TokenFiles files_;
  TokenArray ids_;
  std::int64_t seq_len_;
  Packing packing_;
  RecordSchedule schedule_;
};

}  // namespace dew::data
