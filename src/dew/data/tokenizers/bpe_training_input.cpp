// What the BPE trainer reads: text files, pre-tokenized and counted on several threads.
#include <algorithm>
#include <cctype>
#include <memory>
#include <unordered_map>

#include "dew/core/error.h"
#include "dew/core/mapped_file.h"
#include "dew/core/threads.h"
#include "dew/data/tokenizers/bpe_trainer.h"
#include "dew/data/tokenizers/pretokenizer.h"

namespace dew::data {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

bool ascii_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// Cuts a document into pieces of about kChunkBytes that pre-tokenize exactly as the whole does. A cut goes
// before a space between two ASCII letters, which the pre-tokenizer promises is a piece boundary no match
// reads across; with a pattern that promises nothing the document stays whole.
std::vector<std::string_view> chunk_document(std::string_view text, bool can_cut) {
  std::vector<std::string_view> chunks;
  std::size_t begin = 0;
  while (can_cut && text.size() - begin > kChunkBytes) {
    std::size_t cut = begin + kChunkBytes;
    while (cut + 1 < text.size() && !(text[cut] == ' ' && ascii_letter(text[cut - 1]) && ascii_letter(text[cut + 1])))
      ++cut;
    if (cut + 1 >= text.size()) break;
    chunks.push_back(text.substr(begin, cut - begin));
    begin = cut;
  }
  if (begin < text.size()) chunks.push_back(text.substr(begin));
  return chunks;
}

}  // namespace

PieceCounts count_pieces(const std::vector<std::string_view>& documents, const std::string& split_pattern,
                         int threads) {
  PreTokenizer pretokenizer({split_pattern});
  std::vector<std::string_view> chunks;
  for (auto document : documents)
    for (auto chunk : chunk_document(document, pretokenizer.splits_before_space_between_letters()))
      chunks.push_back(chunk);

  // Each chunk counts into its own table (views into the documents), merged afterwards.
  using Table = std::unordered_map<std::string_view, std::uint64_t>;
  std::vector<Table> tables(chunks.size());
  parallel_for(chunks.size(), threads, [&](std::size_t i) {
    pretokenizer.for_each_piece(chunks[i], [&](std::string_view piece) { ++tables[i][piece]; });
  });
  Table total;
  for (auto& table : tables) {
    if (total.empty()) {
      total = std::move(table);
      continue;
    }
    for (const auto& [piece, count] : table) total[piece] += count;
    Table().swap(table);
  }
  PieceCounts counts;
  counts.reserve(total.size());
  for (const auto& [piece, count] : total) counts.emplace_back(std::string(piece), count);
  std::sort(counts.begin(), counts.end());
  return counts;
}

BpeParts train_bpe(const std::vector<std::string_view>& documents, const BpeTrainerConfig& config) {
  return learn_bpe(count_pieces(documents, config.split_pattern, config.threads), config);
}

std::vector<fs::path> training_text_files(const fs::path& input) {
  std::error_code ec;
  auto status = fs::status(input, ec);
  if (ec || !fs::exists(status)) fail("training input '", input.string(), "' does not exist; give a text file or a directory of *.txt files");
  if (!fs::is_directory(status)) return {input};
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(input, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".txt" && it->is_regular_file()) files.push_back(it->path());
  }
  if (ec) fail("cannot list training directory '", input.string(), "': ", ec.message());
  if (files.empty()) fail("training directory '", input.string(), "' holds no *.txt files");
  std::sort(files.begin(), files.end());
  return files;
}

TrainingText read_training_text(const fs::path& input, std::int64_t max_bytes) {
  if (max_bytes < 0) fail("max_input_bytes ", max_bytes, " is negative; use 0 (read everything) or a byte count");
  TrainingText text;
  std::uint64_t budget = max_bytes > 0 ? static_cast<std::uint64_t>(max_bytes) : UINT64_MAX;
  for (const auto& file : training_text_files(input)) {
    if (budget == 0) break;
    text.files.emplace_back(file);
    std::string_view document(reinterpret_cast<const char*>(text.files.back().data()), text.files.back().size());
    if (document.size() >= budget) {
      std::size_t cut = budget;  // back up to the start of a UTF-8 character
      while (cut > 0 && cut < document.size() && (static_cast<unsigned char>(document[cut]) & 0xC0) == 0x80) --cut;
      document = document.substr(0, cut);
      budget = 0;
    } else {
      budget -= document.size();
    }
    text.documents.push_back(document);
    text.bytes += document.size();
  }
  return text;
}

}  // namespace dew::data
