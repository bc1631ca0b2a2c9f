#include "dew/data/tokenize.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/progress.h"
#include "dew/data/token_files.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"

namespace dew::data {
namespace fs = std::filesystem;

namespace {

// A double as its shortest exact text: 0.9999999 must not read "1" in a message (ostream's 6 digits).
std::string exact(double value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : dew::str(value);
}

// Every input document, in the order its tokens enter the stream.
bool is_inside(const fs::path& inner, const fs::path& outer);

// Every input document, in the order its tokens enter the stream. Files under `out` (an earlier output
// placed inside the input directory) are not input.
std::vector<fs::path> list_inputs(const fs::path& input, const fs::path& out) {
  std::error_code ec;
  if (!fs::exists(input, ec)) dew::fail("input '", input.string(), "' does not exist");
  if (!fs::is_directory(input, ec)) return {input};
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(input, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    // Anything named *.txt that is not a directory is input; one that cannot be read (a dangling link)
    // is an error naming it, not silently skipped.
    if (it->path().extension() == ".txt" && !it->is_directory() && !is_inside(it->path(), out)) {
      files.push_back(it->path());
    }
  }
  if (ec) dew::fail("cannot list directory '", input.string(), "': ", ec.message());
  if (files.empty()) dew::fail("input directory '", input.string(), "' holds no *.txt files");
  // Sorted by path so the token stream (and the validation head) does not depend on the file system.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) { return a.native() < b.native(); });
  return files;
}

fs::path resolved(const fs::path& p) {
  fs::path r = fs::weakly_canonical(fs::absolute(p));
  return r.filename().empty() ? r.parent_path() : r;  // "dir/" names the same directory as "dir"
}

bool is_inside(const fs::path& inner, const fs::path& outer) {
  auto a = resolved(inner), b = resolved(outer);
  auto [end_b, end_a] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return end_b == b.end();
}

// An existing --out is replaced; refuse to replace something that is not a token directory, so a typo
// cannot delete a user's data.
void check_output_path(const fs::path& input, const fs::path& out) {
  std::error_code ec;
  if (is_inside(input, out)) {
    dew::fail("--out '", out.string(), "' holds the input '", input.string(), "'; choose an output directory elsewhere");
  }
  if (!fs::exists(out, ec)) {
    check_no_file_in_the_way(out, dew::str("cannot create --out '", out.string(), "'"));
    return;
  }
  if (!fs::is_directory(out, ec)) dew::fail("--out '", out.string(), "' exists and is not a directory");
  bool empty = fs::is_empty(out, ec);
  if (!empty && !fs::exists(out / "meta.json", ec)) {
    dew::fail("--out '", out.string(), "' exists and is not a token directory (no meta.json); choose another "
              "directory or remove it");
  }
}

// Appends one document's tokens to the stream, block by block.
std::int64_t stream_document(const fs::path& file, const Tokenizer& tokenizer, const TokenizeConfig& config,
                             TokenWriter& stream, Progress* progress) {
  std::ifstream in(file, std::ios::binary);
  if (!in) dew::fail("cannot read input '", file.string(), "': ", std::strerror(errno));
  const auto block = static_cast<std::size_t>(config.block_bytes);
  std::string buffer;  // the carried-over tail of the last block, then the next block
  std::int64_t tokens = 0;
  bool at_end = false;
  while (!at_end) {
    std::size_t carried = buffer.size();
    buffer.resize(carried + block);
    in.read(buffer.data() + carried, static_cast<std::streamsize>(block));
    auto got = static_cast<std::size_t>(in.gcount());
    if (in.bad()) dew::fail("cannot read input '", file.string(), "': I/O error");
    buffer.resize(carried + got);
    at_end = got < block;
    if (buffer.empty()) break;

    std::string_view text(buffer);
    std::size_t cut = text.size();
    if (!at_end) {
      // Cut late in the buffer so the carried tail stays small; when the tokenizer finds no safe cut
      // (one very long "word"), everything waits for the next block.
      cut = tokenizer.safe_cut(text, text.size() - text.size() / 4, text.size());
      if (cut >= text.size()) continue;
    }
    std::vector<TokenId> ids = encode_parallel(tokenizer, text.substr(0, cut), config.threads);
    stream.write(ids);
    tokens += static_cast<std::int64_t>(ids.size());
    if (progress) progress->advance(cut);  // bytes encoded, so the rate shown is the encoding rate
    buffer.erase(0, cut);
  }
  return tokens;
}

// Copies `bytes` bytes from `in` to `out` through a fixed buffer.
void copy_bytes(std::FILE* in, const fs::path& in_name, TokenWriter& out, std::uint64_t bytes) {
  std::vector<char> buffer(std::size_t{8} << 20);
  while (bytes > 0) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, buffer.size()));
    if (std::fread(buffer.data(), 1, want, in) != want) {
      dew::fail("cannot read back '", in_name.string(), "': ", std::strerror(errno));
    }
    out.write_bytes(buffer.data(), want);
    bytes -= want;
  }
}

}  // namespace

void validate_tokenize_config(const TokenizeConfig& config) {
  if (config.input.empty()) dew::fail("--input is required: a text file or a directory of *.txt files");
  if (config.out.empty()) dew::fail("--out is required: the token directory to write");
  if (!(config.val_fraction >= 0.0 && config.val_fraction < 1.0)) {
    dew::fail("val_fraction ", exact(config.val_fraction), " is outside [0, 1); use for example 0.01 (the first 1% of tokens)");
  }
  if (config.block_bytes <= 0) dew::fail("block_bytes ", config.block_bytes, " must be positive");
  if (config.threads < 0) dew::fail("threads ", config.threads, " must be 0 (all available) or positive");
}

TokenizeSummary tokenize_corpus(const TokenizeConfig& config, bool show_progress) {
  validate_tokenize_config(config);
  auto tokenizer = load_tokenizer(config.tokenizer);
  return tokenize_corpus(config, *tokenizer, show_progress);
}

TokenizeSummary tokenize_corpus(const TokenizeConfig& config, const Tokenizer& tokenizer, bool show_progress) {
  validate_tokenize_config(config);
  auto start = std::chrono::steady_clock::now();
  const fs::path input(config.input), out(config.out);
  std::vector<fs::path> files = list_inputs(input, out);
  check_output_path(input, out);
  std::optional<TokenId> eos = tokenizer.eos_id();
  if (config.pack && !eos) {
    dew::fail("--pack needs a tokenizer with an end-of-sequence id, and '", config.tokenizer,
              "' has none; use a BPE tokenizer such as gpt2, or leave out --pack");
  }

  TokenizeSummary summary;
  for (const auto& f : files) {
    std::error_code ec;
    auto size = fs::file_size(f, ec);
    if (ec) dew::fail("cannot read input '", f.string(), "': ", ec.message());
    summary.input_bytes += size;
  }

  const TokenDtype dtype = dtype_for_vocab(tokenizer.vocab_size());
  // What a tokenize killed before it finished left beside --out (.OUT.partial-PID-N, .OUT.old-PID-N).
  const fs::path named = out.filename().empty() ? out.parent_path() : out;
  remove_stale_temporaries(named.parent_path().empty() ? fs::path(".") : named.parent_path(), named.filename().string());
  AtomicDirectory directory(out);  // removed unless committed below
  const fs::path stream_path = directory.path() / "stream.tmp";
  {
    TokenWriter stream(stream_path, dtype);
    std::unique_ptr<Progress> progress;
    if (show_progress) progress = std::make_unique<Progress>("tokenize", summary.input_bytes, "B");
    for (const auto& file : files) {
      std::int64_t tokens = stream_document(file, tokenizer, config, stream, progress.get());
      if (tokens == 0) continue;  // an empty document adds nothing, not even an EOS
      if (config.pack) stream.write(&*eos, 1);
      ++summary.documents;
    }
    stream.close();
    if (progress) progress->finish();
    const std::int64_t total = stream.tokens_written();
    if (total == 0) dew::fail("input '", input.string(), "' holds no text: nothing to tokenize");
    summary.val_tokens = std::llround(config.val_fraction * static_cast<double>(total));
    summary.train_tokens = total - summary.val_tokens;
    if (summary.train_tokens == 0) {
      dew::fail("val_fraction ", exact(config.val_fraction), " of ", total, " tokens leaves no training tokens; lower it");
    }
  }

  // The head of the stream is the validation split, the rest the training split.
  {
    std::FILE* in = std::fopen(stream_path.c_str(), "rb");
    if (!in) dew::fail("cannot read back '", stream_path.string(), "': ", std::strerror(errno));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(in, &std::fclose);
    const std::uint64_t width = dtype_bytes(dtype);
    TokenWriter val(directory.path() / "val.bin", dtype);
    copy_bytes(in, stream_path, val, static_cast<std::uint64_t>(summary.val_tokens) * width);
    val.close();
    TokenWriter train(directory.path() / "train.bin", dtype);
    copy_bytes(in, stream_path, train, static_cast<std::uint64_t>(summary.train_tokens) * width);
    train.close();
  }
  fs::remove(stream_path);

  TokenMeta meta;
  std::string saved = tokenizer.save(directory.path());
  // The byte tokenizer needs no file to load; everything else is read back from the copy saved here.
  meta.tokenizer = tokenizer.name() == "byte" ? "byte" : saved;
  meta.tokenizer_source = config.tokenizer;
  meta.vocab_size = tokenizer.vocab_size();
  meta.dtype = dtype;
  meta.train_tokens = summary.train_tokens;
  meta.val_tokens = summary.val_tokens;
  if (eos) meta.eos_id = *eos;
  meta.packed = config.pack;
  meta.documents = summary.documents;
  meta.tokenizer_sha256 = tokenizer_sha256(tokenizer);  // what eval and resume compare the run's copy with
  write_token_meta(directory.path(), meta);
  directory.commit();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace dew::data
