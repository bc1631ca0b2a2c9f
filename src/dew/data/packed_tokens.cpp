#include "dew/data/packed_tokens.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"

namespace dew::data {

Packing pack_pieces(const std::vector<PackedPiece>& pieces, std::int64_t row_length) {
  Packing packing;
  packing.documents = static_cast<std::int64_t>(pieces.size());
  // First-fit over a max-tree of free space per row (leaves beyond the opened rows are empty rows).
  std::int64_t leaves = 1;
  while (leaves < static_cast<std::int64_t>(pieces.size())) leaves *= 2;
  std::vector<std::int64_t> free(static_cast<std::size_t>(2 * leaves), row_length);
  std::vector<std::int64_t> piece_row(pieces.size());
  std::int64_t rows = 0;
  for (std::size_t p = 0; p < pieces.size(); ++p) {
    const std::int64_t need = pieces[p].length;
    std::size_t node = 1;
    while (node < static_cast<std::size_t>(leaves)) node = free[2 * node] >= need ? 2 * node : 2 * node + 1;
    const std::int64_t row = static_cast<std::int64_t>(node) - leaves;
    free[node] -= need;
    for (std::size_t up = node / 2; up >= 1; up /= 2) free[up] = std::max(free[2 * up], free[2 * up + 1]);
    piece_row[p] = row;
    rows = std::max(rows, row + 1);
  }

  // Group pieces by row, keeping placement order within a row (a counting sort).
  packing.row_offsets.assign(static_cast<std::size_t>(rows) + 1, 0);
  for (auto r : piece_row) ++packing.row_offsets[static_cast<std::size_t>(r) + 1];
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) packing.row_offsets[r + 1] += packing.row_offsets[r];
  packing.pieces.resize(pieces.size());
  std::vector<std::int64_t> fill(packing.row_offsets.begin(), packing.row_offsets.end() - 1);
  for (std::size_t p = 0; p < pieces.size(); ++p) {
    packing.pieces[static_cast<std::size_t>(fill[static_cast<std::size_t>(piece_row[p])]++)] = pieces[p];
  }
  return packing;
}

Packing pack_documents(const TokenArray& ids, std::int64_t eos_id, std::int64_t row_length) {
  if (row_length < 1) dew::fail("packed row length ", row_length, " must be at least 1");
  // Documents, then row-sized pieces of them, in stream order.
  Packing packing;
  std::vector<PackedPiece> pieces;
  std::int64_t doc_start = 0;
  const std::int64_t n = ids.size();
  auto add_document = [&](std::int64_t end) {
    ++packing.documents;
    for (std::int64_t s = doc_start; s < end; s += row_length) pieces.push_back({s, std::min(row_length, end - s)});
    doc_start = end;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    if (ids[i] == eos_id) add_document(i + 1);
  }
  if (doc_start < n) add_document(n);

  Packing placed = pack_pieces(pieces, row_length);
  placed.documents = packing.documents;
  return placed;
}

namespace {

TokenFiles&& require_packed(TokenFiles&& files) {
  if (!files.meta().packed || !files.meta().eos_id) {
    dew::fail("'", (files.dir() / "meta.json").string(), "' says packed: false: its documents are not marked by EOS "
              "ids. Tokenize again with `dew tokenize --pack` and a tokenizer that has an EOS (such as gpt2), or "
              "read it with TokenWindows");
  }
  return std::move(files);
}

Packing checked_packing(const TokenArray& ids, const TokenMeta& meta, std::int64_t seq_len) {
  if (seq_len < 1) dew::fail("seq_len ", seq_len, " must be at least 1");
  check_ids_in_vocab(ids, meta.vocab_size);
  Packing packing = pack_documents(ids, *meta.eos_id, seq_len + 1);
  if (packing.rows() < 1) dew::fail("'", ids.file().string(), "' holds no tokens to pack");
  return packing;
}

}  // namespace

PackedTokens::PackedTokens(const std::filesystem::path& dir, std::int64_t seq_len, TokenLoaderOptions options)
    : PackedTokens(TokenFiles(dir), seq_len, options) {}

PackedTokens::PackedTokens(TokenFiles files, std::int64_t seq_len, TokenLoaderOptions options)
    : files_(require_packed(std::move(files))),
      ids_(files_.split(options.split)),
      seq_len_(seq_len),
      packing_(checked_packing(ids_, files_.meta(), seq_len)),
      schedule_(packing_.rows(), options.seed, options.shuffled(), options.rank, options.world,
                dew::str("'", ids_.file().string(), "' (packed rows of seq_len ", seq_len, ")")) {}

Batch PackedTokens::next_batch(std::int64_t rows) {
  std::vector<std::int64_t> records = schedule_.next(rows);
  const std::int64_t width = seq_len_ + 1;
  at::Tensor text = at::zeros({rows, width}, at::kLong);
  at::Tensor segments = at::zeros({rows, width}, at::kLong);
  at::Tensor positions = at::zeros({rows, width}, at::kLong);
  std::int64_t* t = text.data_ptr<std::int64_t>();
  std::int64_t* s = segments.data_ptr<std::int64_t>();
  std::int64_t* p = positions.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = static_cast<std::size_t>(records[static_cast<std::size_t>(r)]);
    std::int64_t column = r * width;
    std::int64_t segment = 0;
    for (auto k = packing_.row_offsets[row]; k < packing_.row_offsets[row + 1]; ++k) {
      const PackedPiece& piece = packing_.pieces[static_cast<std::size_t>(k)];
      ids_.copy_checked(piece.start, piece.length, t + column, meta().vocab_size);
      ++segment;
      for (std::int64_t i = 0; i < piece.length; ++i) {
        s[column + i] = segment;
        p[column + i] = i;
      }
      column += piece.length;
    }
  }
  Batch batch;
  batch.set("text", text);
  batch.set("text_segment_ids", segments);
  batch.set("text_positions", positions);
  return batch;
}

}  // namespace dew::data
